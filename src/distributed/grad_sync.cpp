#include "distributed/grad_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "distributed/debug_level.h"

namespace lmtrain::dist {
namespace {

// Runs after AccumulateGrad has added this backward's contribution into the parameter's .grad
// (a view of the flat buffer), i.e. once the gradient is final for this backward.
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::shared_ptr<GradSync*> sync, size_t param)
      : sync_(std::move(sync)), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (*sync_) (*sync_)->on_grad_ready(param_);
    return outputs;
  }

 private:
  std::shared_ptr<GradSync*> sync_;
  size_t param_;
};

}  // namespace

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

void GradSync::hook_accumulators() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    if (!acc) throw Error("GradSync: parameter " + std::to_string(i) + " is not a leaf");
    acc->add_post_hook(std::make_unique<ReadyHook>(self_, i));
    accumulators_.push_back(std::move(acc));
  }
}

void GradSync::rebind_to_current_stream() {
  if (!active()) return;
  // Tensors hold their accumulator weakly: with ours the only references, clearing them
  // destroys the nodes and their hooks, and grad_accumulator() then makes new ones.
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    if (accumulators_[i].use_count() > 1) {
      throw Error("internal: GradSync: parameter " + std::to_string(i) +
                  "'s gradient accumulator is also held by a live autograd graph, so it cannot "
                  "move to the current stream");
    }
  }
  accumulators_.clear();
  hook_accumulators();
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

bool GradSync::add_late_rows(size_t param, const at::Tensor& ids, const at::Tensor& rows) {
  if (!armed_) return false;
  for (auto& [p, late] : late_) {
    if (p == param) {
      late->add(ids, rows);
      return true;
    }
  }
  throw Error("internal: GradSync: parameter " + std::to_string(param) + " expects no late rows");
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

void GradSync::on_grad_ready(size_t param) {
  if (!armed_ || seen_[param]) return;
  seen_[param] = true;
  if (--pending_[bucket_of_param_[param]] == 0) {
    if (timeline_) timeline_->ready(bucket_of_param_[param]);
    launch_ready_buckets();
  }
}

void GradSync::launch_ready_buckets() {
  while (next_launch_ < launch_order_.size() && pending_[launch_order_[next_launch_]] == 0) {
    launch(launch_order_[next_launch_++]);
  }
}

void GradSync::launch(size_t i) {
  launch_work(i);
  if (!timeline_) return;
  timeline_->launched(i);
  if (works_[i]) works_[i]->on_complete([timeline = timeline_, i] { timeline->done(i); });
}

void GradSync::launch_work(size_t i) {
  const auto& b = buckets_[i];
  auto slice = flat_grads_.narrow(0, b.begin, b.end - b.begin);
  // Divided by the world size here, then summed (PyTorch DDP's order): the divide runs while
  // earlier buckets are in flight instead of after the wait in finish(), and in fp32 before any
  // lowering. Exact for a power-of-two world; otherwise it rounds each term, not the sum. Every
  // path divides the same way, so sharded and replicated gradients stay bitwise equal. Owner
  // mode divides its packed copies: a parameter another rank owns keeps its local gradient.
  if (!owners_.empty()) {
    launch_to_owners(i);
    return;
  }
  slice.div_(group_.size());
  if (!reduce_scatter_) {
    if (reduce_dtype_) {
      lowered_[i] = slice.to(*reduce_dtype_);
      works_[i] = group_.allreduce(lowered_[i], ReduceOp::kSum);
    } else {
      works_[i] = group_.allreduce(slice, ReduceOp::kSum);
    }
    return;
  }
  // The part of the bucket in rank q's shard goes to rank q; this rank's part comes back
  // averaged, in place. The parts are adjacent views of the bucket, so nothing is copied
  // (with reduce_dtype: views of the bucket's lowered copy, whose own part complete() writes
  // back; the rest of the fp32 buffer keeps this rank's local gradient, as in fp32).
  if (reduce_dtype_) lowered_[i] = slice.to(*reduce_dtype_);
  const at::Tensor& source = reduce_dtype_ ? lowered_[i] : slice;
  std::vector<at::Tensor> parts;
  for (int q = 0; q < group_.size(); ++q) {
    const int64_t lo = std::clamp(q * shard_, b.begin, b.end);
    const int64_t hi = std::clamp((q + 1) * shard_, b.begin, b.end);
    parts.push_back(source.narrow(0, lo - b.begin, hi - lo));
  }
  auto own = parts[group_.rank()];
  works_[i] = group_.reduce_scatter(own, parts, ReduceOp::kSum);
}

at::Tensor GradSync::pack(size_t i, int owner) const {
  std::vector<at::Tensor> pieces;
  for (size_t p : buckets_[i].params) {
    if (owners_[p] == owner) {
      pieces.push_back(flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second));
    }
  }
  return pieces.empty() ? at::empty({0}, flat_grads_.options()) : at::cat(pieces);
}

void GradSync::unpack(size_t i, int owner, const at::Tensor& packed) {
  int64_t at = 0;
  for (size_t p : buckets_[i].params) {
    if (owners_[p] != owner) continue;
    flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second)
        .copy_(packed.narrow(0, at, ranges_[p].second));
    at += ranges_[p].second;
  }
}

void GradSync::launch_to_owners(size_t i) {
  // Every rank has the same buckets and owners, so all take the same branches here.
  std::vector<at::Tensor> to_rank;
  bool owned = false;
  for (int q = 0; q < group_.size(); ++q) {
    to_rank.push_back(pack(i, q).div_(group_.size()));
    owned |= to_rank.back().numel() > 0;
  }
  if (owned) {
    received_[i] = at::empty_like(to_rank[group_.rank()]);
    works_[i] = group_.reduce_scatter(received_[i], to_rank, ReduceOp::kSum);
  }
  shared_[i] = pack(i, -1).div_(group_.size());
  if (shared_[i].numel() > 0) shared_works_[i] = group_.allreduce(shared_[i], ReduceOp::kSum);
}

void GradSync::complete(size_t i) {
  if (works_[i]) {
    works_[i]->wait();
    works_[i].reset();
    if (!owners_.empty()) unpack(i, group_.rank(), received_[i]);
    received_[i] = at::Tensor();
    if (lowered_[i].defined()) {
      const auto& b = buckets_[i];
      if (reduce_scatter_) {  // only this rank's part of the bucket came back averaged
        const int64_t lo = std::clamp(group_.rank() * shard_, b.begin, b.end);
        const int64_t hi = std::clamp((group_.rank() + 1) * shard_, b.begin, b.end);
        flat_grads_.narrow(0, lo, hi - lo).copy_(lowered_[i].narrow(0, lo - b.begin, hi - lo));
      } else {
        flat_grads_.narrow(0, b.begin, b.end - b.begin).copy_(lowered_[i]);
      }
      lowered_[i] = at::Tensor();
    }
  }
  if (shared_works_[i]) {
    shared_works_[i]->wait();
    shared_works_[i].reset();
    unpack(i, -1, shared_[i]);
  }
  shared_[i] = at::Tensor();
}

double GradSync::finish() {
  if (!active()) return 0;
  if (!armed_) next_launch_ = 0;
  const bool timed = timeline_ && armed_;
  if (timed) timeline_->backward_end();
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  // Parameters that got no gradient (or a backward that ran without hooks, such as
  // torch::autograd::grad) leave buckets unlaunched: send them now, still in order.
  for (auto& p : pending_) p = 0;
  launch_ready_buckets();
  for (auto& [p, late] : late_) late->start_exchange(group_);
  for (size_t i = 0; i < works_.size(); ++i) {
    if (works_[i] || shared_works_[i]) {
      complete(i);
      if (timed) timeline_->done(i);
    }
  }
  for (auto& [p, late] : late_) late->add_mean(group_);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timed) {
    // Every rank's backward end, to tell the wait for slower ranks from the transfers (DETAIL
    // only: one more small collective per step).
    auto mine = at::full({1}, timeline_->backward_end_clock_ns(), at::kLong);
    std::vector<at::Tensor> ends(static_cast<size_t>(group_.size()));
    for (auto& e : ends) e = at::empty_like(mine);
    group_.allgather(ends, mine)->wait();
    std::vector<int64_t> ends_ns;
    for (const auto& e : ends) ends_ns.push_back(e.item<int64_t>());
    log::info(log::format("TORCH_DISTRIBUTED_DEBUG: rank %d: ", group_.rank()) +
              timeline_->table(buckets_, flat_grads_.element_size()) + "\n" +
              BucketTimeline::skew_line(ends_ns, group_.rank()));
  }
  return waited;
}

}  // namespace lmtrain::dist
