// Data-parallel gradient averaging in buckets, overlapped with backward.
//
// The gradients live in one flat buffer (optim/flat_params.h) laid out in the order backward
// completes them. GradSync cuts that buffer into contiguous buckets of ~bucket_bytes and hooks
// each parameter's gradient accumulator: once every parameter of a bucket has its final
// gradient, the bucket's all-reduce is launched — while backward carries on with the earlier
// layers. Buckets launch strictly in index order, so every rank issues the same sequence of
// collectives whatever order its hooks fire in. Nothing is sent on accumulation micro-steps:
// hooks only act while armed, and the caller arms them for the last micro-step alone.
// The model is untouched; with a world of one GradSync does nothing.
//
// Reduce-scatter mode (ZeRO-1 and ZeRO-2): the buffer is also cut into size() equal shards and each
// rank needs only its own shard averaged. Each bucket then goes out as an all-to-all — the piece of
// the bucket in shard q to rank q — and the received pieces are summed in rank order.
//
// Owner mode (DistMuon): owners[i] >= 0 means only that rank needs parameter i's averaged
// gradient (it alone updates the parameter); -1 means every rank does. Per bucket, the owned
// gradients go out as one all-to-all (each to its owner, summed there in rank order) and the
// rest as one all-reduce, each over a packed copy of the pieces.
//
// `reduce_dtype` (all-reduce and reduce-scatter modes): buckets travel in this dtype (bf16
// halves the traffic) and the average comes back into the fp32 buffer (reduce-scatter: this
// rank's shard of it).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "distributed/bucket_plan.h"
#include "distributed/bucket_timeline.h"
#include "distributed/group.h"
#include "distributed/late_rows.h"

namespace torch::autograd {
struct Node;
}

namespace lmtrain::dist {

class GradSync {
 public:
  // params[i]'s gradient is flat_grads[ranges[i].first, +ranges[i].second).
  GradSync(Group& group, const std::vector<at::Tensor>& params,
           const std::vector<std::pair<int64_t, int64_t>>& ranges, at::Tensor flat_grads,
           int64_t bucket_bytes, bool reduce_scatter = false, std::vector<int> owners = {},
           std::optional<at::ScalarType> reduce_dtype = std::nullopt);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // The next backward's gradient completions launch bucket all-reduces.
  void arm();
  // Launches whatever backward did not (everything when not armed), waits for all buckets and
  // leaves the rank-average in the flat buffer. Returns the seconds spent waiting here: the
  // communication that backward did not hide.
  double finish();

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // The order buckets go out in: index order, but a table with late rows first.
  const std::vector<size_t>& launch_order() const { return launch_order_; }
  // Buckets whose all-reduce has been launched since arm() (before finish(): by the hooks).
  size_t launched() const { return next_launch_; }
  bool active() const { return group_.size() > 1; }

  // Remakes the gradient accumulators, with their hooks, on the current stream. The autograd
  // engine runs an accumulator on the stream that was current when it was made, and this object
  // keeps them alive across steps. A CUDA graph captures its step on a side stream; an
  // accumulator made on the default stream would pull that stream into the capture
  // (cudaErrorStreamCaptureImplicit), which is why PyTorch builds DDP on the capture stream.
  // Call it on the capture stream before the first step; no autograd graph may be alive.
  void rebind_to_current_stream();

  // Called by the hooks (public for them only).
  void on_grad_ready(size_t param);

  // Parameter `param`, a (rows, width) table, may get part of its gradient after its bucket went
  // out (distributed/late_rows.h; all-reduce mode only). From then on every finish() exchanges
  // its late rows, on every rank alike.
  void expect_late_rows(size_t param, int64_t rows, int64_t width);
  // Backward of the last micro-step: keeps (n,) ids and (n, width) rows of `param` for finish().
  // Returns false when not armed (an accumulation micro-step): the caller adds them itself.
  bool add_late_rows(size_t param, const at::Tensor& ids, const at::Tensor& rows);
  void stop_late_rows() { late_.clear(); }  // every rank alike

 private:
  void log_bucket_layout(size_t num_params) const;  // TORCH_DISTRIBUTED_DEBUG=INFO|DETAIL
  void hook_accumulators();  // makes (or finds) each parameter's accumulator and hooks it
  void set_buckets(std::vector<GradBucket> buckets);  // and every per-bucket vector
  void launch_ready_buckets();
  void launch(size_t bucket);       // launch_work, and the timeline's marks
  void launch_work(size_t bucket);  // the bucket's collective(s) of this mode
  void launch_to_owners(size_t bucket);
  void complete(size_t bucket);
  // Owner mode: the gradients of bucket's parameters owned by `owner` (-1: shared), packed in
  // parameter order; and the reverse copy back into the flat buffer.
  at::Tensor pack(size_t bucket, int owner) const;
  void unpack(size_t bucket, int owner, const at::Tensor& packed);

  Group& group_;
  at::Tensor flat_grads_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> bucket_of_param_;
  std::vector<int64_t> pending_;  // per bucket: parameters still without a final gradient
  std::vector<bool> seen_;        // per parameter, this backward
  std::vector<std::shared_ptr<Work>> works_;
  bool reduce_scatter_ = false;
  int64_t shard_ = 0;                 // reduce-scatter: elements per rank's shard
  std::vector<at::Tensor> received_;  // owner mode: per bucket, this rank's averaged gradients
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // per parameter (offset, numel)
  std::vector<int> owners_;                          // owner mode: per parameter, -1 = all
  std::vector<at::Tensor> shared_;                   // owner mode: per bucket, packed -1 pieces
  std::vector<std::shared_ptr<Work>> shared_works_;
  std::optional<at::ScalarType> reduce_dtype_;  // wire dtype, if not the buffer's
  std::vector<at::Tensor> lowered_;             // per bucket: the wire copy in flight
  size_t next_launch_ = 0;                      // into launch_order_
  std::vector<size_t> launch_order_;            // bucket indices; the same on every rank
  bool layout_logged_ = false;
  bool armed_ = false;
  std::vector<at::Tensor> params_;  // the leaves whose gradients land in flat_grads_
  // Keeps the accumulators (and so our hooks) alive between backward passes.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::shared_ptr<GradSync*> self_;  // hooks hold this; reset to null on destruction
  // TORCH_DISTRIBUTED_DEBUG=DETAIL: each armed step's bucket times, logged by finish(). Shared
  // with the completion callbacks, which may outlive a step.
  std::shared_ptr<BucketTimeline> timeline_;
  std::vector<std::pair<size_t, std::unique_ptr<LateRows>>> late_;  // (param, its late rows)
};

}  // namespace lmtrain::dist
