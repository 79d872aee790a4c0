#include "core/error.h"
#include "distributed/group.h"

namespace lmtrain::dist {
namespace {

class DoneWork : public Work {
 public:
  void wait() override {}
};

class SingleRankGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }

  std::shared_ptr<Work> allreduce(at::Tensor&, ReduceOp) override { return done(); }
  std::shared_ptr<Work> broadcast(at::Tensor&, int root) override {
    if (root != 0) throw Error("broadcast root " + std::to_string(root) + " in a world of 1");
    return done();
  }
  std::shared_ptr<Work> allgather(std::vector<at::Tensor>& outputs,
                                  const at::Tensor& input) override {
    if (outputs.size() != 1) throw Error("allgather needs 1 output in a world of 1");
    if (!outputs[0].is_same(input)) outputs[0].copy_(input);
    return done();
  }
  std::shared_ptr<Work> reduce_scatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                       ReduceOp) override {
    if (inputs.size() != 1) throw Error("reduce_scatter needs 1 input in a world of 1");
    if (!output.is_same(inputs[0])) output.copy_(inputs[0]);
    return done();
  }
  std::shared_ptr<Work> all_to_all(at::Tensor& output, const at::Tensor& input,
                                   const std::vector<int64_t>&,
                                   const std::vector<int64_t>&) override {
    if (!output.is_same(input)) output.copy_(input);
    return done();
  }
  void barrier() override {}
  std::unique_ptr<Group> split(const std::vector<int>& ranks) override {
    if (split_index(ranks, 0, 1) < 0) return nullptr;
    return make_single_rank_group();
  }

 private:
  static std::shared_ptr<Work> done() { return std::make_shared<DoneWork>(); }
};

}  // namespace

int split_index(const std::vector<int>& ranks, int rank, int size) {
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size || (i > 0 && ranks[i] <= ranks[i - 1])) {
      std::string list;
      for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
      throw Error("split: ranks [" + list + "] are not increasing ranks of a group of " +
                  std::to_string(size));
    }
    if (ranks[i] == rank) index = static_cast<int>(i);
  }
  if (ranks.empty()) throw Error("split: empty rank list");
  return index;
}

std::unique_ptr<Group> make_single_rank_group() { return std::make_unique<SingleRankGroup>(); }

}  // namespace lmtrain::dist
