// The server's decoding thread: jobs submitted together decode in one batch and each gets what
// it would have got alone (greedy), static batches hold only jobs that can share a sampler, a
// cancelled job stops, and a full queue refuses with 503. (Continuous batching step by step:
// continuous_batch_test.cpp.)
#include "serve/generation_queue.h"

#include <gtest/gtest.h>

#include "infer/kv_test_models.h"
#include "serve/chat_request.h"

namespace lmtrain::serve {
namespace {

infer::SamplingOptions sampling(double temperature) {
  infer::SamplingOptions o;
  o.temperature = temperature;
  o.top_k = 5;
  return o;
}

std::vector<uint32_t> all_tokens(GenerationJob& job) {
  std::vector<uint32_t> all, more;
  for (bool done = false; !done;) {
    done = job.next(all.size(), more, std::chrono::milliseconds(1000));
    all.insert(all.end(), more.begin(), more.end());
  }
  return all;
}

TEST(GenerationQueue, JobsWaitingTogetherDecodeInOneBatchAsEachWouldAlone) {
  auto m = infer::eval_decoder(infer::tiny_decoder("qwen3", 48), 7);
  QueueOptions o;
  o.max_batch = 3;
  o.eot_id = 3;
  GenerationQueue queue(*m, o);
  queue.pause();
  const std::vector<std::vector<uint32_t>> prompts = {{5, 9, 2}, {1, 2, 3, 4, 5, 6}, {17}, {8, 8}};
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    jobs.push_back(queue.submit(prompts[i], 6 + static_cast<int64_t>(i), sampling(0), i));
  }
  EXPECT_EQ(queue.waiting(), 4u);
  queue.resume();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto got = all_tokens(*jobs[i]);
    const auto want =
        infer::generate(*m, prompts[i], 6 + static_cast<int64_t>(i), sampling(0), 0, 3);
    EXPECT_EQ(got, want) << "job " << i;
    EXPECT_TRUE(jobs[i]->error.empty()) << jobs[i]->error;
  }
  const auto stats = queue.stats();
  EXPECT_EQ(stats.batches, 2);  // 3 + 1: greedy jobs share a batch whatever their seeds
  EXPECT_EQ(stats.largest_batch, 3);
}

TEST(GenerationQueue, StaticBatchesShareOnlyTheSameSamplingSettings) {
  auto m = infer::eval_decoder(infer::tiny_decoder("gpt2", 48), 7);
  QueueOptions o;
  o.continuous = false;  // one sampler per batch (continuous batching: one per job)
  GenerationQueue queue(*m, o);
  queue.pause();
  auto a = queue.submit({5, 6}, 4, sampling(0.8), 1);
  auto b = queue.submit({5, 6}, 4, sampling(0.8), 2);     // another seed
  auto c = queue.submit({5, 6}, 4, sampling(0.5), 1);     // another temperature
  auto d = queue.submit({7, 6, 5}, 4, sampling(0.8), 1);  // a's settings: batched with it
  queue.resume();
  for (auto* j : {&a, &b, &c, &d}) EXPECT_EQ(all_tokens(**j).size(), 4u);
  const auto stats = queue.stats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.largest_batch, 2);
  // The same request with the same seed gives the same answer.
  auto again = queue.submit({5, 6}, 4, sampling(0.8), 2);
  EXPECT_EQ(all_tokens(*again), b->tokens);
}

TEST(GenerationQueue, CancelledJobsStopAndAFullQueueRefuses) {
  auto m = infer::eval_decoder(infer::tiny_decoder("gpt2", 48), 7);
  QueueOptions o;
  o.max_waiting = 2;
  GenerationQueue queue(*m, o);
  queue.pause();
  auto gone = queue.submit({5, 6}, 30, sampling(0), std::nullopt);
  auto kept = queue.submit({5, 6}, 5, sampling(0), std::nullopt);
  try {
    queue.submit({5}, 5, sampling(0), std::nullopt);
    ADD_FAILURE() << "a third job was taken";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status, 503);
  }
  gone->cancelled = true;
  queue.resume();
  EXPECT_TRUE(all_tokens(*gone).empty());
  EXPECT_EQ(gone->stop, infer::StopReason::kCancelled);
  EXPECT_EQ(all_tokens(*kept).size(), 5u);
}

}  // namespace
}  // namespace lmtrain::serve
