// The server's one decoding thread. HTTP handlers submit jobs (a prompt's ids, a token budget,
// sampling settings) from any thread; the queue's thread decodes them, up to max_batch at once.
// Each new id goes to its job as it is decoded, for streaming. Only this thread touches the
// model, so libtorch sees one caller.
//
// Continuous batching (the default; serve/continuous_batch.h): at every decode step, rows that
// stopped leave and waiting jobs join the running batch, each with its own sampler and seed.
// Static batching (QueueOptions::continuous false, or a KV-cache policy or model that cannot
// take rows mid-flight: continuous_batching_refusal() says why, and the queue logs it): the
// waiting jobs that can share a batch (the same sampling settings and seed; one prompt length
// for caches that cannot pad) decode together through infer::generate_batch until the last one
// stops, while jobs arriving meanwhile wait for the next batch.
// Either way a job whose client went away is cancelled and its row stops at the next step.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "infer/generator.h"
#include "infer/kv_cache_policy.h"
#include "infer/sampler.h"
#include "model/gpt.h"

namespace lmtrain::serve {

struct GenerationJob {
  std::vector<uint32_t> prompt;
  int64_t max_new_tokens = 0;
  infer::SamplingOptions sampling;
  std::optional<uint64_t> seed;  // none: the queue draws one; jobs with one batch only alike

  // Written by the queue's thread under `mutex`; read through next().
  std::vector<uint32_t> tokens;  // the new ids so far, the end token included when it stopped
  bool done = false;
  infer::StopReason stop = infer::StopReason::kLength;
  std::string error;  // set when decoding failed: the job is done without an answer
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point submitted;
  std::mutex mutex;
  std::condition_variable changed;

  // Waits until there are more than `seen` tokens or the job is done (or `timeout` passes);
  // copies the tokens past `seen` into `out`. Returns true when the job is done and every token
  // has been handed out.
  bool next(size_t seen, std::vector<uint32_t>& out, std::chrono::milliseconds timeout);
};

struct QueueOptions {
  int64_t max_batch = 8;
  size_t max_waiting = 256;  // jobs waiting beyond this are refused (503)
  int64_t eot_id = -1;
  infer::KvPolicy policy;
  bool continuous = true;       // false: static batches (also when the policy cannot)
  int64_t prefill_chunk = 256;  // continuous: prompt tokens prefilled per decode step at most
};

struct QueueStats {
  // Continuous: batches counts admissions (jobs joining together), largest_batch the most rows
  // decoding at once.
  int64_t batches = 0, rows = 0, largest_batch = 0;
  int64_t cancelled = 0;  // jobs whose client left before they ended
  int64_t running = 0;    // jobs decoding (or prefilling) now
  bool continuous = false;
};

class GenerationQueue {
 public:
  GenerationQueue(model::GptImpl& model, QueueOptions options);
  ~GenerationQueue();
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  // Throws RequestError 503 when max_waiting jobs are already waiting.
  std::shared_ptr<GenerationJob> submit(std::vector<uint32_t> prompt, int64_t max_new_tokens,
                                        const infer::SamplingOptions& sampling,
                                        std::optional<uint64_t> seed);
  QueueStats stats() const;
  size_t waiting() const;
  // While paused no new batch starts (one already decoding finishes): submitted jobs wait, and
  // on resume they batch as they would have had they arrived together.
  void pause();
  void resume();

 private:
  void run();
  void run_continuous();
  std::vector<std::shared_ptr<GenerationJob>> take_batch();  // under mutex_
  // Under mutex_: drops the waiting jobs whose client left; at shutdown, fails the rest.
  void drop_cancelled_waiting();
  void fail_waiting();
  void decode(const std::vector<std::shared_ptr<GenerationJob>>& batch);

  model::GptImpl& model_;
  QueueOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<GenerationJob>> waiting_;
  bool stopping_ = false;
  bool paused_ = false;
  uint64_t next_seed_ = 0;
  QueueStats stats_;
  std::thread thread_;
};

}  // namespace lmtrain::serve
