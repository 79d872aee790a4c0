#include "serve/generation_queue.h"

#include <torch/csrc/autograd/grad_mode.h>

#include "core/log.h"
#include "serve/chat_request.h"

namespace lmtrain::serve {
namespace {

// Jobs that may decode in one generate_batch call: one sampler and seed serve the whole batch,
// and caches that keep tokens by position in the row (streaming, h2o) cannot left-pad.
bool batch_together(const GenerationJob& a, const GenerationJob& b, bool pads) {
  if (a.sampling.temperature != b.sampling.temperature || a.sampling.top_k != b.sampling.top_k ||
      a.sampling.top_p != b.sampling.top_p) {
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
    : model_(model), options_(std::move(options)), thread_([this] { run(); }) {}

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

std::vector<std::shared_ptr<GenerationJob>> GenerationQueue::take_batch() {
  std::vector<std::shared_ptr<GenerationJob>> batch;
  const bool pads = options_.policy.supports_padding();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled) {  // gone before it started
      std::lock_guard<std::mutex> job_lock((*it)->mutex);
      (*it)->done = true;
      (*it)->stop = infer::StopReason::kCancelled;
      it = waiting_.erase(it);
      continue;
    }
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
        for (auto& job : waiting_) {
          std::lock_guard<std::mutex> job_lock(job->mutex);
          job->error = "the server is shutting down";
          job->done = true;
          job->changed.notify_all();
        }
        return;
      }
      batch = take_batch();
      if (batch.empty()) continue;
      stats_.batches += 1;
      stats_.rows += static_cast<int64_t>(batch.size());
      stats_.largest_batch = std::max<int64_t>(stats_.largest_batch, batch.size());
    }
    decode(batch);
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
    for (size_t i = 0; i < batch.size(); ++i) {
      std::lock_guard<std::mutex> lock(batch[i]->mutex);
      batch[i]->stop = result.rows[i].stop;
      batch[i]->done = true;
    }
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

}  // namespace lmtrain::serve
