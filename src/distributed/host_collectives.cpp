#include "distributed/host_collectives.h"

#include <cstring>

namespace lmtrain::dist {

bool any_rank(Group& group, bool flag) { return max_over_ranks(group, flag ? 1 : 0) > 0; }

int max_over_ranks(Group& group, int value) {
  if (group.size() == 1) return value;
  auto t = torch::tensor({static_cast<float>(value)});  // exact for the small values used here
  group.allreduce(t, ReduceOp::kMax)->wait();
  return static_cast<int>(t.item<float>());
}

std::vector<int64_t> all_gather_values(Group& group, const std::vector<int64_t>& values) {
  if (group.size() == 1) return values;
  const auto n = static_cast<int64_t>(values.size());
  auto mine = torch::from_blob(const_cast<int64_t*>(values.data()), {n}, torch::kLong).clone();
  std::vector<at::Tensor> all;
  for (int r = 0; r < group.size(); ++r) all.push_back(torch::empty({n}, torch::kLong));
  group.allgather(all, mine)->wait();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n) * all.size());
  for (const auto& t : all) out.insert(out.end(), t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
  return out;
}

std::string broadcast_text(Group& group, const std::string& text, int root) {
  if (group.size() == 1) return text;
  auto len = torch::tensor({static_cast<int64_t>(group.rank() == root ? text.size() : 0)});
  group.broadcast(len, root)->wait();
  const int64_t n = len.item<int64_t>();
  if (n == 0) return "";
  auto bytes = torch::zeros({n}, torch::kUInt8);
  if (group.rank() == root) std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), text.size());
  group.broadcast(bytes, root)->wait();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                     static_cast<size_t>(n));
}

}  // namespace lmtrain::dist
