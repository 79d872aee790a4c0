#include "serve/generation_queue.h"

#include <torch/csrc/autograd/grad_mode.h>

#include "core/log.h"
#include "serve/chat_request.h"
#include "serve/continuous_batch.h"

namespace lmtrain::serve {
namespace {

// Jobs that may decode in one generate_batch call: one sampler and seed serve the whole batch,
// and caches that keep tokens by position in the row (streaming, h2o) cannot left-pad.
bool batch_together(const GenerationJob& a, const GenerationJob& b, bool pads) {
  if (a.sampling.temperature != b.sampling.temperature || a.sampling.top_k != b.sampling.top_k ||
      a.sampling.top_p != b.sampling.top_p || a.sampling.logit_bias != b.sampling.logit_bias) {
    return false;
  }
  const bool greedy = a.sampling.temperature == 0;
  if (!greedy && a.seed != b.seed) return false;
  return pads || a.prompt.size() == b.prompt.size();
}

}  // namespace

bool GenerationJob::next(size_t seen, std::vector<uint32_t>& out,
                         std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait_for(lock, timeout, [&] { return done || tokens.size() > seen; });
  out.assign(tokens.begin() + static_cast<std::ptrdiff_t>(std::min(seen, tokens.size())),
             tokens.end());
  return done;
}

GenerationQueue::GenerationQueue(model::GptImpl& model, QueueOptions options)
    : model_(model), options_(std::move(options)) {
  if (options_.continuous) {
    const auto why = continuous_batching_refusal(options_.policy, model_);
    if (!why.empty()) {
      log::warn("serve: static batching (a batch runs until its last request ends): " + why);
      options_.continuous = false;
    }
  }
  stats_.continuous = options_.continuous;
  thread_ = std::thread([this] { options_.continuous ? run_continuous() : run(); });
}

GenerationQueue::~GenerationQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<GenerationJob> GenerationQueue::submit(std::vector<uint32_t> prompt,
                                                       int64_t max_new_tokens,
                                                       const infer::SamplingOptions& sampling,
                                                       std::optional<uint64_t> seed) {
  auto job = std::make_shared<GenerationJob>();
  job->prompt = std::move(prompt);
  job->max_new_tokens = max_new_tokens;
  job->sampling = sampling;
  job->seed = seed;
  job->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (waiting_.size() >= options_.max_waiting) {
      throw RequestError(503,
                         "the server is busy: " + std::to_string(waiting_.size()) +
                             " requests are waiting; try again later",
                         "", "server_busy");
    }
    waiting_.push_back(job);
  }
  wake_.notify_one();
  return job;
}

QueueStats GenerationQueue::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void GenerationQueue::pause() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = true;
}

void GenerationQueue::resume() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = false;
  }
  wake_.notify_all();
}

size_t GenerationQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_.size();
}

void GenerationQueue::drop_cancelled_waiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!(*it)->cancelled) {
      ++it;
      continue;
    }
    {  // gone before it started
      std::lock_guard<std::mutex> job_lock((*it)->mutex);
      (*it)->done = true;
      (*it)->stop = infer::StopReason::kCancelled;
    }
    (*it)->changed.notify_all();
    stats_.cancelled += 1;
    it = waiting_.erase(it);
  }
}

void GenerationQueue::fail_waiting() {
  for (auto& job : waiting_) {
    std::lock_guard<std::mutex> job_lock(job->mutex);
    job->error = "the server is shutting down";
    job->done = true;
    job->changed.notify_all();
  }
  waiting_.clear();
}

std::vector<std::shared_ptr<GenerationJob>> GenerationQueue::take_batch() {
  std::vector<std::shared_ptr<GenerationJob>> batch;
  const bool pads = options_.policy.supports_padding();
  drop_cancelled_waiting();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (batch.empty() || batch_together(*batch.front(), **it, pads)) {
      batch.push_back(*it);
      it = waiting_.erase(it);
      if (static_cast<int64_t>(batch.size()) >= options_.max_batch) break;
    } else {
      ++it;
    }
  }
  return batch;
}

void GenerationQueue::run() {
  for (;;) {
    std::vector<std::shared_ptr<GenerationJob>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (!paused_ && !waiting_.empty()); });
      if (stopping_) {
        fail_waiting();
        return;
      }
      batch = take_batch();
      if (batch.empty()) continue;
      stats_.batches += 1;
      stats_.rows += static_cast<int64_t>(batch.size());
      stats_.largest_batch = std::max<int64_t>(stats_.largest_batch, batch.size());
      stats_.running = static_cast<int64_t>(batch.size());
    }
    decode(batch);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.running = 0;
  }
}

void GenerationQueue::decode(const std::vector<std::shared_ptr<GenerationJob>>& batch) {
  std::vector<std::vector<uint32_t>> prompts;
  std::vector<int64_t> budgets;
  for (const auto& job : batch) {
    prompts.push_back(job->prompt);
    budgets.push_back(job->max_new_tokens);
  }
  const uint64_t seed = batch.front()->seed.value_or(next_seed_++);
  try {
    torch::NoGradGuard no_grad;
    auto result = infer::generate_batch(
        model_, prompts, budgets, batch.front()->sampling, seed, options_.eot_id, options_.policy,
        [&](size_t row, uint32_t id) {
          auto& job = *batch[row];
          {
            std::lock_guard<std::mutex> lock(job.mutex);
            job.tokens.push_back(id);
          }
          job.changed.notify_all();
        },
        {}, [&](size_t row) { return batch[row]->cancelled.load(); });
    int64_t cancelled = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      std::lock_guard<std::mutex> lock(batch[i]->mutex);
      batch[i]->stop = result.rows[i].stop;
      batch[i]->done = true;
      cancelled += batch[i]->stop == infer::StopReason::kCancelled;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.cancelled += cancelled;
  } catch (const std::exception& e) {
    log::warn(std::string("serve: decoding a batch failed: ") + e.what());
    for (const auto& job : batch) {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->error = e.what();
      job->done = true;
    }
  }
  for (const auto& job : batch) job->changed.notify_all();
}

void GenerationQueue::run_continuous() {
  ContinuousBatch batch(model_, options_.eot_id, options_.prefill_chunk);
  int64_t counted_cancelled = 0;  // batch.cancelled() already in stats_
  for (;;) {
    std::vector<std::shared_ptr<GenerationJob>> joining;
    std::vector<uint64_t> seeds;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock,
                 [&] { return stopping_ || !batch.idle() || (!paused_ && !waiting_.empty()); });
      if (stopping_) {
        fail_waiting();
        batch.fail("the server is shutting down");
        return;
      }
      drop_cancelled_waiting();
      // The waiting join together, in arrival order, as soon as the batch has room and no
      // earlier group is still prefilling.
      const int64_t room = options_.max_batch - batch.running();
      while (!paused_ && batch.admitted() == 0 && !waiting_.empty() &&
             static_cast<int64_t>(joining.size()) < room) {
        auto& job = waiting_.front();
        seeds.push_back(job->seed ? *job->seed : next_seed_++);
        joining.push_back(std::move(job));
        waiting_.pop_front();
      }
      if (!joining.empty()) {
        stats_.batches += 1;
        stats_.rows += static_cast<int64_t>(joining.size());
        // Running from now on: their prefill (in step() below) already streams the first token,
        // and a /health asked right after it must count them (it saw 0 here, 2026-11-28).
        stats_.running = batch.running() + batch.admitted() + static_cast<int64_t>(joining.size());
      }
    }
    try {
      if (!joining.empty()) batch.admit(std::move(joining), seeds);
      batch.step();
    } catch (const std::exception& e) {
      log::warn(std::string("serve: decoding failed: ") + e.what());
      batch.fail(e.what());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.largest_batch = batch.largest();
    stats_.running = batch.running() + batch.admitted();
    stats_.cancelled += batch.cancelled() - counted_cancelled;
    counted_cancelled = batch.cancelled();
  }
}

}  // namespace lmtrain::serve
