#include "dist/grad_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"

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

std::vector<GradBucket> plan_buckets(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                     int64_t total, int64_t element_size, int64_t bucket_bytes) {
  std::vector<GradBucket> buckets;
  GradBucket cur;
  int64_t prev_end = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [offset, numel] = ranges[i];
    if (offset < prev_end) throw Error("plan_buckets: parameter ranges overlap or are unordered");
    prev_end = offset + numel;
    if (cur.params.empty()) cur.begin = offset;
    cur.params.push_back(i);
    if ((prev_end - cur.begin) * element_size >= bucket_bytes) {
      cur.end = i + 1 < ranges.size() ? ranges[i + 1].first : total;
      buckets.push_back(std::move(cur));
      cur = GradBucket{};
    }
  }
  if (!cur.params.empty()) {
    cur.end = total;
    buckets.push_back(std::move(cur));
  }
  if (!buckets.empty()) buckets.front().begin = 0;  // leading padding, if any, goes along
  return buckets;
}

GradSync::GradSync(Group& group, const std::vector<at::Tensor>& params,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, at::Tensor flat_grads,
                   int64_t bucket_bytes, bool reduce_scatter, std::vector<int> owners)
    : group_(group),
      flat_grads_(std::move(flat_grads)),
      reduce_scatter_(reduce_scatter),
      ranges_(ranges),
      owners_(std::move(owners)) {
  if (!owners_.empty() && owners_.size() != params.size()) {
    throw Error("GradSync: one owner per parameter expected");
  }
  if (!owners_.empty() && reduce_scatter_) {
    throw Error("GradSync: owner mode and reduce-scatter mode are exclusive");
  }
  if (params.size() != ranges.size()) throw Error("GradSync: params and ranges differ in count");
  buckets_ = plan_buckets(ranges, flat_grads_.numel(), flat_grads_.element_size(),
                          std::max<int64_t>(1, bucket_bytes));
  bucket_of_param_.resize(params.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p : buckets_[b].params) bucket_of_param_[p] = b;
  }
  pending_.resize(buckets_.size());
  seen_.assign(params.size(), false);
  works_.resize(buckets_.size());
  received_.resize(buckets_.size());
  shared_.resize(buckets_.size());
  shared_works_.resize(buckets_.size());
  if (reduce_scatter_) {
    if (flat_grads_.numel() % group.size() != 0) {
      throw Error("GradSync: reduce-scatter needs a gradient buffer that splits over the ranks");
    }
    shard_ = flat_grads_.numel() / group.size();
  }
  self_ = std::make_shared<GradSync*>(this);
  if (!active()) return;
  for (size_t i = 0; i < params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    if (!acc) throw Error("GradSync: parameter " + std::to_string(i) + " is not a leaf");
    acc->add_post_hook(std::make_unique<ReadyHook>(self_, i));
    accumulators_.push_back(std::move(acc));
  }
}

GradSync::~GradSync() { *self_ = nullptr; }

void GradSync::arm() {
  if (!active()) return;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  seen_.assign(seen_.size(), false);
  next_launch_ = 0;
  armed_ = true;
}

void GradSync::on_grad_ready(size_t param) {
  if (!armed_ || seen_[param]) return;
  seen_[param] = true;
  if (--pending_[bucket_of_param_[param]] == 0) launch_ready_buckets();
}

void GradSync::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch(next_launch_++);
}

namespace {
// Elements of [begin, end) that fall in [lo, hi).
int64_t overlap(int64_t begin, int64_t end, int64_t lo, int64_t hi) {
  return std::max<int64_t>(0, std::min(end, hi) - std::max(begin, lo));
}
}  // namespace

void GradSync::launch(size_t i) {
  const auto& b = buckets_[i];
  auto slice = flat_grads_.narrow(0, b.begin, b.end - b.begin);
  if (!owners_.empty()) {
    launch_to_owners(i);
    return;
  }
  if (!reduce_scatter_) {
    works_[i] = group_.allreduce(slice, ReduceOp::kAvg);
    return;
  }
  const int w = group_.size(), me = group_.rank();
  std::vector<int64_t> send(w);
  for (int q = 0; q < w; ++q) send[q] = overlap(b.begin, b.end, q * shard_, (q + 1) * shard_);
  received_[i] = at::empty({w * send[me]}, flat_grads_.options());
  works_[i] = group_.all_to_all(received_[i], slice, std::vector<int64_t>(w, send[me]), send);
}

void GradSync::launch_to_owners(size_t i) {
  const auto& b = buckets_[i];
  const int w = group_.size(), me = group_.rank();
  std::vector<at::Tensor> send_pieces, shared_pieces;
  std::vector<int64_t> send(w, 0);
  for (int q = 0; q < w; ++q) {
    for (size_t p : b.params) {
      if (owners_[p] != q) continue;
      send_pieces.push_back(flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second));
      send[q] += ranges_[p].second;
    }
  }
  for (size_t p : b.params) {
    if (owners_[p] < 0) {
      shared_pieces.push_back(flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second));
    }
  }
  // Every rank has the same buckets and owners, so all take the same branches here.
  if (!send_pieces.empty()) {
    auto packed = at::cat(send_pieces);
    received_[i] = at::empty({w * send[me]}, flat_grads_.options());
    works_[i] = group_.all_to_all(received_[i], packed, std::vector<int64_t>(w, send[me]), send);
  }
  if (!shared_pieces.empty()) {
    shared_[i] = at::cat(shared_pieces);
    shared_works_[i] = group_.allreduce(shared_[i], ReduceOp::kAvg);
  }
}

void GradSync::complete_to_owners(size_t i) {
  const auto& b = buckets_[i];
  const int w = group_.size(), me = group_.rank();
  if (works_[i]) {
    works_[i]->wait();
    works_[i].reset();
    int64_t n = 0;
    for (size_t p : b.params) n += owners_[p] == me ? ranges_[p].second : 0;
    if (n > 0) {
      auto parts = received_[i].view({w, n});
      auto sum = parts[0].clone();
      for (int s = 1; s < w; ++s) sum.add_(parts[s]);
      sum.div_(w);
      int64_t at = 0;
      for (size_t p : b.params) {
        if (owners_[p] != me) continue;
        flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second)
            .copy_(sum.narrow(0, at, ranges_[p].second));
        at += ranges_[p].second;
      }
    }
    received_[i] = at::Tensor();
  }
  if (shared_works_[i]) {
    shared_works_[i]->wait();
    shared_works_[i].reset();
    int64_t at = 0;
    for (size_t p : b.params) {
      if (owners_[p] >= 0) continue;
      flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second)
          .copy_(shared_[i].narrow(0, at, ranges_[p].second));
      at += ranges_[p].second;
    }
    shared_[i] = at::Tensor();
  }
}

void GradSync::complete(size_t i) {
  if (!owners_.empty()) {
    complete_to_owners(i);
    return;
  }
  works_[i]->wait();
  works_[i].reset();
  if (!reduce_scatter_) return;
  const auto& b = buckets_[i];
  const int w = group_.size(), me = group_.rank();
  const int64_t lo = std::max(b.begin, me * shard_);
  const int64_t n = overlap(b.begin, b.end, me * shard_, (me + 1) * shard_);
  if (n > 0) {
    auto parts = received_[i].view({w, n});
    auto own = flat_grads_.narrow(0, lo, n);
    own.copy_(parts[0]);
    for (int s = 1; s < w; ++s) own.add_(parts[s]);
    own.div_(w);
  }
  received_[i] = at::Tensor();
}

double GradSync::finish() {
  if (!active()) return 0;
  if (!armed_) next_launch_ = 0;
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  // Parameters that got no gradient (or a backward that ran without hooks, such as
  // torch::autograd::grad) leave buckets unlaunched: send them now, still in order.
  for (auto& p : pending_) p = 0;
  launch_ready_buckets();
  for (size_t i = 0; i < works_.size(); ++i) {
    if (works_[i] || shared_works_[i]) complete(i);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lmtrain::dist
