#include "parallel/tp_split_matrices.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "core/error.h"

namespace lmtrain::parallel {
namespace {

class TpSplitMatrices : public optim::SplitMatrices {
 public:
  TpSplitMatrices(model::GptConfig cfg, std::map<std::string, TpSlice> slices, dist::Group& tp)
      : cfg_(std::move(cfg)), slices_(std::move(slices)), tp_(tp) {}

  int parts() const override { return tp_.size(); }
  bool split(const std::string& name) const override { return slice(name).sharded(); }

  at::Tensor gather(const std::string& name, const at::Tensor& piece) override {
    const TpSlice& s = slice(name);
    if (!s.sharded()) return piece;
    std::vector<at::Tensor> pieces(tp_.size());
    for (auto& p : pieces) p = at::empty_like(piece);
    tp_.allgather(pieces, piece.contiguous())->wait();
    return assemble_tp_pieces(cfg_, name, s, pieces);
  }

  at::Tensor piece(const std::string& name, const at::Tensor& whole) const override {
    const TpSlice& s = slice(name);
    if (!s.sharded()) return whole;
    std::vector<at::Tensor> parts;
    for (const auto& [b, e] : s.ranges) parts.push_back(whole.narrow(s.dim, b, e - b));
    return parts.size() == 1 ? parts[0] : at::cat(parts, s.dim);
  }

  void sum(at::Tensor& t) override { tp_.allreduce(t, dist::ReduceOp::kSum)->wait(); }

 private:
  const TpSlice& slice(const std::string& name) const {
    const auto it = slices_.find(name);
    if (it == slices_.end())
      throw Error("tensor parallelism: no slice for parameter '" + name + "'");
    return it->second;
  }

  model::GptConfig cfg_;
  std::map<std::string, TpSlice> slices_;
  dist::Group& tp_;
};

}  // namespace

std::shared_ptr<optim::SplitMatrices> make_tp_split_matrices(
    const model::GptConfig& cfg, const std::map<std::string, TpSlice>& slices, dist::Group& tp) {
  return std::make_shared<TpSplitMatrices>(cfg, slices, tp);
}

at::Tensor assemble_tp_pieces(const model::GptConfig& cfg, const std::string& name,
                              const TpSlice& s, const std::vector<at::Tensor>& pieces) {
  const int T = static_cast<int>(pieces.size());
  auto whole = at::empty(s.whole_shape, pieces.at(0).options());
  for (int r = 0; r < T; ++r) {
    const auto rs = tensor_parallel_slice(cfg, name, s.whole_shape, r, T);
    int64_t at_piece = 0;
    for (const auto& [b, e] : rs.ranges) {
      whole.narrow(s.dim, b, e - b).copy_(pieces[r].narrow(s.dim, at_piece, e - b));
      at_piece += e - b;
    }
  }
  return whole;
}

}  // namespace lmtrain::parallel
