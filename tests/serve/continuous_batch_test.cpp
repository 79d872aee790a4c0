// Continuous batching, driven step by step (no threads, so the interleaving is the test's):
// jobs that arrive while others decode, long prompts prefilled in chunks between decode steps,
// jobs that stop early (end token, max_tokens), leave (client gone) or are sampled with their own
// seeds each get what generate() gives them alone, token for token. The queue falls back to
// static batching, saying so, for the KV-cache policies that cannot take rows mid-flight.
//
// Why exact equality holds: a job's prompt is prefilled alone when it arrives alone (the same
// kernels as generate()), and in a batch every row's real keys, positions and queries are its
// own; what differs is only the masked pad keys in the softmax and weights @ v sums (exact zeros
// added) and the order a batched GEMM accumulates, both rounding-level (the logits agree to 1e-5,
// tests/infer/ragged_kv_cache_test.cpp), far below the gaps between the best logits the greedy
// and sampled choices here depend on (fixed models and seeds: a failure is reproducible).
#include "serve/continuous_batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/runtime.h"
#include "infer/generator.h"
#include "infer/kv_test_models.h"
#include "serve/generation_queue.h"

namespace lmtrain::serve {
namespace {

infer::SamplingOptions settings(double temperature, int64_t top_k = 0) {
  infer::SamplingOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  return o;
}

std::shared_ptr<GenerationJob> job(std::vector<uint32_t> prompt, int64_t max_new,
                                   infer::SamplingOptions sampling = settings(0)) {
  auto j = std::make_shared<GenerationJob>();
  j->prompt = std::move(prompt);
  j->max_new_tokens = max_new;
  j->sampling = sampling;
  return j;
}

std::vector<uint32_t> tokens_of(GenerationJob& j) {
  std::lock_guard<std::mutex> lock(j.mutex);
  return j.tokens;
}

std::vector<uint32_t> alone(model::GptImpl& m, const GenerationJob& j, uint64_t seed, int64_t eot) {
  return infer::generate(m, j.prompt, j.max_new_tokens, j.sampling, seed, eot);
}

// The staggered scenario below on `device` (the model and every batch tensor there).
void check_staggered_jobs_get_their_tokens_alone(const torch::Device& device) {
  for (const std::string family : {"gpt2", "qwen3", "moe"}) {
    auto m = infer::eval_decoder(infer::tiny_decoder(family, 64), 41);
    m->to(device);
    // An end token the second job (seed 2) samples on its own first at its 4th token or later:
    // it stops there, after it joined the batch.
    const std::vector<uint32_t> long_prompt = {29, 3,  51, 12, 7,  44, 18, 60, 2,  35,
                                               9,  27, 50, 14, 38, 5,  61, 22, 11, 47};
    // (Sampled: these random tiny decoders repeat one token when greedy.)
    const auto probe = infer::generate(*m, long_prompt, 16, settings(1.0), 2, -1);
    size_t at = 3;
    while (at + 1 < probe.size() &&
           std::find(probe.begin(), probe.begin() + static_cast<std::ptrdiff_t>(at), probe[at]) !=
               probe.begin() + static_cast<std::ptrdiff_t>(at)) {
      ++at;
    }
    const int64_t eot = probe[at];
    ContinuousBatch batch(*m, eot, /*prefill_chunk=*/8);
    auto a = job({5, 9, 2}, 24);
    auto b = job(long_prompt, 30, settings(1.0));     // stops at the end token
    auto c = job({17, 18, 19, 20, 21}, 6);            // stops at its max_tokens
    auto d = job({40, 41}, 20, settings(0.9, 8));     // sampled, seed 5
    auto e = job({33, 34, 35, 36}, 30);               // its client leaves
    auto f = job({8, 8, 8, 8, 8, 8, 8, 8, 8, 8}, 9);  // arrives into a batch that shrank
    const std::map<GenerationJob*, uint64_t> seed = {{a.get(), 1}, {b.get(), 2}, {c.get(), 3},
                                                     {d.get(), 5}, {e.get(), 6}, {f.get(), 7}};
    auto admit = [&](std::vector<std::shared_ptr<GenerationJob>> jobs) {
      std::vector<uint64_t> seeds;
      for (const auto& j : jobs) seeds.push_back(seed.at(j.get()));
      batch.admit(std::move(jobs), seeds);
    };
    admit({a});
    for (int i = 0; i < 3; ++i) batch.step();
    EXPECT_EQ(batch.running(), 1);
    admit({b});  // 20 tokens in chunks of 8: a goes on decoding meanwhile
    batch.step();
    EXPECT_EQ(batch.admitted(), 1) << "b still prefilling";
    EXPECT_EQ(tokens_of(*a).size(), 5u);
    batch.step();
    batch.step();
    EXPECT_EQ(batch.admitted(), 0);
    ASSERT_GE(at, 3u) << family;
    EXPECT_FALSE(b->done) << family << ": b stops at its token " << at + 1;
    admit({c, d, e});  // three at once
    batch.step();
    batch.step();
    e->cancelled = true;  // after its first tokens
    batch.step();
    EXPECT_EQ(e->stop, infer::StopReason::kCancelled);
    EXPECT_TRUE(e->done);
    while (!c->done) batch.step();
    admit({f});
    while (!batch.idle()) batch.step();
    EXPECT_EQ(batch.cancelled(), 1);
    EXPECT_GE(batch.largest(), 4) << family;  // a, b, c, d, e, less any that stopped early

    for (const auto& j : {a, b, c, d, f}) {
      const auto want = alone(*m, *j, seed.at(j.get()), eot);
      ASSERT_GE(want.size(), 1u);
      EXPECT_EQ(tokens_of(*j), want) << family << " seed " << seed.at(j.get());
      EXPECT_TRUE(j->done && j->error.empty());
      const bool hit = !want.empty() && static_cast<int64_t>(want.back()) == eot;
      EXPECT_EQ(j->stop, hit ? infer::StopReason::kEot : infer::StopReason::kLength);
    }
    EXPECT_EQ(b->stop, infer::StopReason::kEot) << family;
    EXPECT_EQ(tokens_of(*c).size(), 6u);
    const auto e_got = tokens_of(*e), e_alone = alone(*m, *e, 6, eot);
    ASSERT_FALSE(e_got.empty());
    ASSERT_LT(e_got.size(), e_alone.size());
    EXPECT_TRUE(std::equal(e_got.begin(), e_got.end(), e_alone.begin())) << "e: a prefix";
  }
}

TEST(ContinuousBatch, StaggeredJobsLeavingEarlyGetTheirTokensAlone) {
  check_staggered_jobs_get_their_tokens_alone(torch::kCPU);
}

// The same on a GPU (the masked decode kernels, the row moves and the per-job generators on
// CUDA); skipped where no GPU is visible. Run by scripts/device_check.sh with the other Cuda*.
TEST(CudaContinuousBatch, StaggeredJobsLeavingEarlyGetTheirTokensAlone) {
  if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";
  check_staggered_jobs_get_their_tokens_alone(torch::kCUDA);
}

TEST(ContinuousBatch, ASeededJobSamplesTheSameWhateverElseIsInTheBatch) {
  auto m = infer::eval_decoder(infer::tiny_decoder("qwen3", 64), 42);
  const auto sampled = settings(1.0, 16);
  std::vector<uint32_t> want;
  for (int company = 0; company < 3; ++company) {
    ContinuousBatch batch(*m, -1, 256);
    auto mine = job({7, 8, 9}, 16, sampled);
    std::vector<std::shared_ptr<GenerationJob>> jobs = {mine};
    std::vector<uint64_t> seeds = {1234};
    for (int k = 0; k < company * 2; ++k) {  // others with other settings and seeds
      jobs.push_back(job({static_cast<uint32_t>(10 + k), 11, 12, 13}, 10 + k,
                         k % 2 ? settings(0) : settings(0.7, 4)));
      seeds.push_back(static_cast<uint64_t>(99 + k));
    }
    if (company == 2) {  // and one arriving later into the running batch
      batch.admit({jobs[1]}, {seeds[1]});
      batch.step();
      batch.step();
      jobs.erase(jobs.begin() + 1);
      seeds.erase(seeds.begin() + 1);
    }
    batch.admit(jobs, seeds);
    while (!batch.idle()) batch.step();
    const auto got = tokens_of(*mine);
    if (company == 0) {
      want = got;
      EXPECT_EQ(got, infer::generate(*m, mine->prompt, 16, sampled, 1234, -1));
    }
    EXPECT_EQ(got, want) << "with " << company * 2 << " others";
  }
}

TEST(ContinuousBatch, PoliciesThatCannotTakeRowsMidFlightBatchStatically) {
  auto m = infer::eval_decoder(infer::tiny_decoder("gpt2", 48), 7);
  EXPECT_EQ(continuous_batching_refusal(infer::parse_kv_policy("full"), *m), "");
  EXPECT_EQ(continuous_batching_refusal(infer::parse_kv_policy("full:window_bound=0"), *m), "");
  for (const char* policy : {"int8", "int4:group=16", "streaming:sinks=2,window=8",
                             "h2o:budget=8,recent=4", "streaming:sinks=2,window=8+int8"}) {
    const auto why = continuous_batching_refusal(infer::parse_kv_policy(policy), *m);
    EXPECT_NE(why.find(policy), std::string::npos) << policy << ": " << why;
    QueueOptions o;
    o.policy = infer::parse_kv_policy(policy);
    GenerationQueue queue(*m, o);
    EXPECT_FALSE(queue.stats().continuous) << policy;
  }
  auto smear = infer::tiny_decoder("gpt2", 48);
  smear.smear = true;
  auto ms = infer::eval_decoder(smear, 7);
  EXPECT_NE(continuous_batching_refusal(infer::parse_kv_policy("full"), *ms).find("smear"),
            std::string::npos);
  // The fallback still decodes: int8 rows of different lengths batched statically, as alone.
  QueueOptions o;
  o.policy = infer::parse_kv_policy("int8:residual=64");
  GenerationQueue queue(*m, o);
  queue.pause();
  auto x = queue.submit({5, 9, 2}, 6, settings(0), std::nullopt);
  auto y = queue.submit({1, 2, 3, 4, 5, 6}, 7, settings(0), std::nullopt);
  queue.resume();
  for (const auto& j : {x, y}) {
    std::vector<uint32_t> all, more;
    for (bool done = false; !done;) {
      done = j->next(all.size(), more, std::chrono::milliseconds(1000));
      all.insert(all.end(), more.begin(), more.end());
    }
    EXPECT_EQ(all,
              infer::generate(*m, j->prompt, j->max_new_tokens, settings(0), 0, -1, {}, o.policy));
  }
  EXPECT_EQ(queue.stats().batches, 1);
  EXPECT_FALSE(queue.stats().continuous);
  GenerationQueue full(*m, QueueOptions{});
  EXPECT_TRUE(full.stats().continuous);
}

}  // namespace
}  // namespace lmtrain::serve
