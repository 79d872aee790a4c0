#include "serve/continuous_batch.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "infer/sampler.h"
#include "serve/generation_queue.h"

namespace lmtrain::serve {
namespace {

void finish_continuous_job(GenerationJob& job, infer::StopReason stop, const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(job.mutex);
    job.stop = stop;
    job.error = error;
    job.done = true;
  }
  job.changed.notify_all();
}

// (B, T) int64 on the model's device from rows of T ids each.
at::Tensor continuous_ids(const std::vector<std::vector<uint32_t>>& rows, int64_t begin, int64_t t,
                          const model::GptImpl& model) {
  std::vector<int64_t> v;
  for (const auto& r : rows) v.insert(v.end(), r.begin() + begin, r.begin() + begin + t);
  return at::tensor(v, at::kLong).view({static_cast<int64_t>(rows.size()), t}).to(model.device());
}

}  // namespace

std::string continuous_batching_refusal(const infer::KvPolicy& policy,
                                        const model::GptImpl& model) {
  if (policy.quant) {
    return "--kv_cache=" + policy.text +
           " quantises keys in groups of slots, which a row moved into a running batch would "
           "regroup";
  }
  if (policy.select != infer::KvPolicy::Select::kAll) {
    return "--kv_cache=" + policy.text +
           " keeps tokens by their position in the row, which a row moved into a running "
           "batch would shift";
  }
  if (model.config().smear) {
    return "the model's model.smear keeps the previous token's embedding per decode call, not "
           "per row";
  }
  return "";
}

ContinuousBatch::ContinuousBatch(model::GptImpl& model, int64_t eot_id, int64_t prefill_chunk)
    : model_(model),
      eot_id_(eot_id),
      prefill_chunk_(std::max<int64_t>(1, prefill_chunk)),
      cache_(model, {}) {}

void ContinuousBatch::admit(std::vector<std::shared_ptr<GenerationJob>> jobs,
                            const std::vector<uint64_t>& seeds) {
  if (!admitted_.empty()) throw Error("internal: ContinuousBatch::admit while prefilling");
  const int64_t block = model_.config().block_size;
  size_t longest = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& job = jobs[i];
    const auto P = static_cast<int64_t>(job->prompt.size());
    if (P == 0 || P >= block) {
      finish_continuous_job(*job, infer::StopReason::kLength,
                            log::format("a prompt of %lld tokens does not fit the model's "
                                        "block_size %lld",
                                        (long long)P, (long long)block));
      continue;
    }
    if (job->max_new_tokens <= 0) {
      finish_continuous_job(*job, infer::StopReason::kLength, "");
      continue;
    }
    // The learned positions and the cache end at block_size: as generate_batch, stop there.
    const int64_t budget = std::min(job->max_new_tokens, block - P);
    admitted_.push_back({job, at::make_generator<at::CPUGeneratorImpl>(seeds[i]), budget, 0});
    longest = std::max(longest, job->prompt.size());
  }
  if (admitted_.empty()) return;
  // Left-padded to the longest (pad id: the end token, as generate_batch; it is masked).
  std::vector<int64_t> pad;
  prefill_ids_.clear();
  for (const auto& row : admitted_) {
    const auto& p = row.job->prompt;
    pad.push_back(static_cast<int64_t>(longest - p.size()));
    prefill_ids_.emplace_back(longest - p.size(),
                              static_cast<uint32_t>(std::max<int64_t>(eot_id_, 0)));
    prefill_ids_.back().insert(prefill_ids_.back().end(), p.begin(), p.end());
  }
  prefill_cache_.emplace(model_, pad);
  prefilled_ = 0;
}

bool ContinuousBatch::emit(Row& row, uint32_t id) {
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(row.job->mutex);
    row.job->tokens.push_back(id);
    n = row.job->tokens.size();
  }
  row.job->changed.notify_all();
  row.last = id;
  if (eot_id_ >= 0 && id == static_cast<uint32_t>(eot_id_)) {
    finish_continuous_job(*row.job, infer::StopReason::kEot, "");
    return true;
  }
  if (static_cast<int64_t>(n) >= row.budget) {
    const bool cut = row.budget < row.job->max_new_tokens;
    finish_continuous_job(*row.job, cut ? infer::StopReason::kContext : infer::StopReason::kLength,
                          "");
    return true;
  }
  return false;
}

std::vector<int64_t> ContinuousBatch::draw(std::vector<Row>& rows, const at::Tensor& logits) {
  // What generate() does for one prompt: sample_next on the row's (1, V) logits with its own
  // generator. Greedy rows go through it too: their vocabulary limit and logit_bias apply to the
  // argmax as well.
  std::vector<int64_t> going_on;
  for (size_t b = 0; b < rows.size(); ++b) {
    auto& row = rows[b];
    if (row.job->cancelled) {
      finish_continuous_job(*row.job, infer::StopReason::kCancelled, "");
      ++cancelled_;
      continue;
    }
    const int64_t id =
        infer::sample_next(logits.narrow(0, static_cast<int64_t>(b), 1), row.job->sampling, row.gen)
            .item<int64_t>();
    if (!emit(row, static_cast<uint32_t>(id))) going_on.push_back(static_cast<int64_t>(b));
  }
  return going_on;
}

void ContinuousBatch::prefill_chunk() {
  if (admitted_.empty()) return;
  const auto L = static_cast<int64_t>(prefill_ids_[0].size());
  const int64_t t = std::min(prefill_chunk_, L - prefilled_);
  auto logits =
      model_.forward_cached(continuous_ids(prefill_ids_, prefilled_, t, model_), *prefill_cache_);
  prefilled_ += t;
  if (prefilled_ < L) return;
  // The prompts are in: each draws its first token, and those that go on join the batch.
  const auto keep = draw(admitted_, logits.select(1, t - 1).to(at::kCPU));  // (A, V)
  prefill_cache_->keep_rows(keep);
  cache_.join(std::move(*prefill_cache_));
  for (const auto r : keep) rows_.push_back(std::move(admitted_[static_cast<size_t>(r)]));
  admitted_.clear();
  prefill_cache_.reset();
  prefill_ids_.clear();
}

void ContinuousBatch::drop_cancelled() {
  std::vector<int64_t> keep;
  for (size_t b = 0; b < rows_.size(); ++b) {
    if (rows_[b].job->cancelled) {
      finish_continuous_job(*rows_[b].job, infer::StopReason::kCancelled, "");
      ++cancelled_;
    } else {
      keep.push_back(static_cast<int64_t>(b));
    }
  }
  keep_rows(keep);
}

void ContinuousBatch::keep_rows(const std::vector<int64_t>& keep) {
  if (keep.size() == rows_.size()) return;
  cache_.keep_rows(keep);
  std::vector<Row> kept;
  for (const auto r : keep) kept.push_back(std::move(rows_[static_cast<size_t>(r)]));
  rows_ = std::move(kept);
}

void ContinuousBatch::step() {
  torch::NoGradGuard no_grad;
  prefill_chunk();
  drop_cancelled();
  if (rows_.empty()) return;
  largest_ = std::max(largest_, running());
  std::vector<std::vector<uint32_t>> last;
  for (const auto& row : rows_) last.push_back({row.last});
  auto logits = model_.forward_cached(continuous_ids(last, 0, 1, model_), cache_);  // (B, 1, V)
  keep_rows(draw(rows_, logits.select(1, 0).to(at::kCPU)));
}

void ContinuousBatch::fail(const std::string& error) {
  for (auto* rows : {&rows_, &admitted_}) {
    for (auto& row : *rows) finish_continuous_job(*row.job, infer::StopReason::kLength, error);
    rows->clear();
  }
  cache_ = infer::RaggedKvCache(model_, {});
  prefill_cache_.reset();
  prefill_ids_.clear();
}

}  // namespace lmtrain::serve
