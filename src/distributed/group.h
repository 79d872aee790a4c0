// dist::Group: the one communication interface of lmtrain. Backends: c10d Gloo (CPU), c10d NCCL
// (CUDA builds) and a single-rank group whose collectives are no-ops, so a single-process run
// takes exactly the same code path as a distributed one.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lmtrain::dist {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// An in-flight collective. wait() blocks until the result tensors are ready.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Runs `callback` once the collective has completed, on whatever thread completes it (for
  // timelines: GradSync's TORCH_DISTRIBUTED_DEBUG=DETAIL). A backend that cannot tell never calls
  // it.
  virtual void on_complete(std::function<void()> callback) { (void)callback; }
};

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // In place on `tensor`.
  virtual std::shared_ptr<Work> allreduce(at::Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast(at::Tensor& tensor, int root) = 0;
  // outputs[r] receives rank r's `input`; outputs.size() == size().
  virtual std::shared_ptr<Work> allgather(std::vector<at::Tensor>& outputs,
                                          const at::Tensor& input) = 0;
  // output = reduce(inputs[rank()]) across ranks; inputs.size() == size().
  virtual std::shared_ptr<Work> reduce_scatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                               ReduceOp op) = 0;
  // Splits along dim 0: rows [sum(input_splits[<r]), +input_splits[r]) of `input` go to rank
  // r; rows from rank s land at [sum(output_splits[<s]), +output_splits[s]) of `output`.
  // Empty split lists mean equal splits (size()*k rows).
  virtual std::shared_ptr<Work> all_to_all(at::Tensor& output, const at::Tensor& input,
                                           const std::vector<int64_t>& output_splits = {},
                                           const std::vector<int64_t>& input_splits = {}) = 0;
  virtual void barrier() = 0;

  // A sub-group over `ranks` (this group's rank numbers, increasing), like
  // torch.distributed.new_group: every rank of this group calls split with the same list, in
  // the same order of calls; members get the sub-group (rank = index in `ranks`), the others
  // nullptr. Throws naming the list when it is not increasing ranks of this group.
  virtual std::unique_ptr<Group> split(const std::vector<int>& ranks) = 0;
};

// Checks a split() rank list against a group of `size` ranks; returns this rank's index in it
// or -1.
int split_index(const std::vector<int>& ranks, int rank, int size);

// World of one: every collective completes immediately with the identity result.
std::unique_ptr<Group> make_single_rank_group();

}  // namespace lmtrain::dist
