// GradSync's set-up (distributed/grad_sync.h): the bucket layout cut from the flat gradient
// buffer, its TORCH_DISTRIBUTED_DEBUG log, the late-row tables that reorder it, and arm(), which
// opens a step's last micro-step to the hooks. The hooks are in grad_sync_hooks.cpp, the bucket
// collectives in grad_sync_launch.cpp, the wait at a step's end in grad_sync_finish.cpp.
#include "distributed/grad_sync.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "distributed/debug_level.h"

namespace lmtrain::dist {

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& params,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, at::Tensor flat_grads,
                   int64_t bucket_bytes, bool reduce_scatter, std::vector<int> owners,
                   std::optional<at::ScalarType> reduce_dtype)
    : group_(group),
      flat_grads_(std::move(flat_grads)),
      reduce_scatter_(reduce_scatter),
      ranges_(ranges),
      owners_(std::move(owners)) {
  if (reduce_dtype && *reduce_dtype != flat_grads_.scalar_type()) {
    if (!owners_.empty()) {
      throw UsageError(
          "train.grad_reduce_dtype=bf16 applies to all-reduced or reduce-scattered gradients: "
          "use it with optim.name=adamw (dist.zero 0, 1 or 2), or keep fp32");
    }
    reduce_dtype_ = reduce_dtype;
  }
  if (!owners_.empty() && owners_.size() != params.size()) {
    throw Error("GradSync: one owner per parameter expected");
  }
  if (!owners_.empty() && reduce_scatter_) {
    throw Error("GradSync: owner mode and reduce-scatter mode are exclusive");
  }
  if (params.size() != ranges.size()) throw Error("GradSync: params and ranges differ in count");
  set_buckets(plan_buckets(ranges, flat_grads_.numel(), flat_grads_.element_size(),
                           std::max<int64_t>(1, bucket_bytes), kTailBucketBytes));
  seen_.assign(params.size(), false);
  if (reduce_scatter_) {
    if (flat_grads_.numel() % group.size() != 0) {
      throw Error("GradSync: reduce-scatter needs a gradient buffer that splits over the ranks");
    }
    shard_ = flat_grads_.numel() / group.size();
  }
  self_ = std::make_shared<GradSync*>(this);
  if (!active()) return;
  params_ = params;
  hook_accumulators();
}

void GradSync::set_buckets(std::vector<GradBucket> buckets) {
  buckets_ = std::move(buckets);
  bucket_of_param_.assign(ranges_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p : buckets_[b].params) bucket_of_param_[p] = b;
  }
  const size_t n = buckets_.size();
  pending_.assign(n, 0);
  works_.assign(n, nullptr);
  lowered_.assign(n, at::Tensor());
  received_.assign(n, at::Tensor());
  shared_.assign(n, at::Tensor());
  shared_works_.assign(n, nullptr);
  launch_order_.resize(n);
  for (size_t b = 0; b < n; ++b) launch_order_[b] = b;
  if (torch_distributed_debug() == DebugLevel::kDetail) {
    timeline_ = std::make_shared<BucketTimeline>(n);
  }
}

GradSync::~GradSync() { *self_ = nullptr; }

void GradSync::log_bucket_layout(size_t num_params) const {
  const char* mode = reduce_scatter_    ? "reduce-scatter (ZeRO-1/2)"
                     : !owners_.empty() ? "to owners (DistMuon) + all-reduce"
                                        : "all-reduce";
  const auto dtype = reduce_dtype_.value_or(flat_grads_.scalar_type());
  log::info(log::format(
      "TORCH_DISTRIBUTED_DEBUG: rank %d of %d: gradient sync by %s in %s, %zu bucket(s) over %zu "
      "parameters (%lld elements); buckets launch in index order during the last micro-step's "
      "backward",
      group_.rank(), group_.size(), mode, std::string(c10::toString(dtype)).c_str(),
      buckets_.size(), num_params, (long long)flat_grads_.numel()));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const auto& k = buckets_[b];
    log::info(
        log::format("TORCH_DISTRIBUTED_DEBUG:   bucket %zu: elements [%lld, %lld) = %.3f MiB, %zu "
                    "parameter(s), first #%zu",
                    b, (long long)k.begin, (long long)k.end,
                    (k.end - k.begin) * flat_grads_.element_size() / 1048576.0, k.params.size(),
                    k.params.empty() ? size_t{0} : k.params.front()));
  }
}

void GradSync::expect_late_rows(size_t param, int64_t rows, int64_t width) {
  if (reduce_scatter_ || !owners_.empty() || param >= ranges_.size() ||
      ranges_[param].second != rows * width) {
    throw Error("internal: GradSync: late rows need all-reduce mode and a (rows, width) table");
  }
  auto grad = flat_grads_.narrow(0, ranges_[param].first, ranges_[param].second);
  late_.emplace_back(param, std::make_unique<LateRows>(grad.view({rows, width})));
  // The table's accumulator now fires with the head's part, at the start of backward: its
  // bucket, alone, goes first.
  isolate_param(buckets_, ranges_, param);
  set_buckets(std::move(buckets_));
  const size_t first = bucket_of_param_[param];
  launch_order_.erase(launch_order_.begin() + static_cast<std::ptrdiff_t>(first));
  launch_order_.insert(launch_order_.begin(), first);
}

void GradSync::arm() {
  if (!active()) return;
  if (!layout_logged_ && torch_distributed_debug() != DebugLevel::kOff) {
    log_bucket_layout(ranges_.size());
  }
  layout_logged_ = true;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  seen_.assign(seen_.size(), false);
  next_launch_ = 0;
  armed_ = true;
  if (timeline_) timeline_->start();
}

}  // namespace lmtrain::dist
