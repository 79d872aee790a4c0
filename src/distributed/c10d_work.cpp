#include "distributed/c10d_work.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "distributed/c10d_error.h"

namespace lmtrain::dist {

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // Gloo has no AVG: sum, then divide (see C10dWork)
      return c10d::ReduceOp::SUM;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

at::Tensor concatenated(const std::vector<at::Tensor>& tensors) {
  bool adjacent = true;
  int64_t total = 0;
  for (const auto& t : tensors) {
    adjacent = adjacent && t.is_contiguous() && t.dtype() == tensors[0].dtype() &&
               t.storage().is_alias_of(tensors[0].storage()) &&
               t.storage_offset() == tensors[0].storage_offset() + total;
    total += t.numel();
  }
  if (adjacent) return tensors[0].as_strided({total}, {1});
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void reduce_in_rank_order(const at::Tensor& received, at::Tensor& output, ReduceOp op, int size) {
  auto parts = received.view({size, output.numel()});
  auto out = output.view({-1});
  out.copy_(parts[0]);
  for (int s = 1; s < size; ++s) {
    if (op == ReduceOp::kMax) {
      at::maximum_out(out, out, parts[s]);
    } else if (op == ReduceOp::kMin) {
      at::minimum_out(out, out, parts[s]);
    } else {
      out.add_(parts[s]);
    }
  }
  if (op == ReduceOp::kAvg) out.div_(size);
}

void C10dWork::wait() {
  if (done_) return;
  try {
    if (work_) work_->wait();
  } catch (const std::exception& e) {
    throw Error(what_ + " failed: " + brief_error(e) +
                " (a peer rank has probably died or is stuck; see its log)");
  }
  done_ = true;
  if (finish_) finish_();
}

void C10dWork::on_complete(std::function<void()> callback) {
  if (!work_) return;
  try {
    work_->getFuture()->addCallback(
        [callback = std::move(callback)](c10::ivalue::Future&) { callback(); });
  } catch (const std::exception&) {
    // This backend's work has no future: the timeline shows the wait's return instead.
  }
}

}  // namespace lmtrain::dist
