// The tiny temporal-encoder setup that end-to-end tests of issue 26 share: `lmtrain
// temporal-data` writes synthetic curves with questions, and a tiny LM is first trained on their
// text (`temporal-data --lm_text`: each question with the curve's statistics and attributes in
// words at the series' place, so it learns the answer format, the class priors, and to answer
// from a description in its context), to which encoder runs are then aligned, frozen. Costs a few
// seconds; build it once per suite (SetUpTestSuite). temporal_generate_test.cpp uses the default
// size; temporal_train_test.cpp a larger corpus and LM (TemporalLmSpec).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/sha256.h"
#include "test_util.h"

namespace lmtrain::testing {

// The samples and the LM trained on their text: how many, and the LM's shape and schedule.
struct TemporalLmSpec {
  int64_t samples = 480;  // temporal-data --num_samples (trend, seasonality, spikes)
  int64_t vocab_size = 320;
  int64_t n_embd = 32;
  int64_t block_size = 128;
  int64_t micro_batch = 8;
  int64_t total_batch = 512;  // tokens per step
  int64_t warmup_steps = 3;
  // At 200 steps (about 2 s) the small LM answers with the templates' phrases (val loss ~0.9);
  // at 30 its greedy answers were still punctuation and an encoder had nothing to steer.
  int64_t lm_steps = 200;
  // The questions asked (temporal-data --tasks).
  std::string tasks = " --tasks trend --tasks seasonality --tasks spikes";

  // The larger corpus and LM the QA suites align to: 3000 samples, vocabulary 512, width 64,
  // 2000 steps of 16 rows on one thread (about 25 s). It must read the description at the
  // series' place before an encoder can write one: after 400 steps it answered "flat" whatever
  // trend word stood there, after 1200 it still read "several" spikes as "one" (greedy answers
  // to held-out descriptions: spikes 0.35), after 2000 it reads all three (0.95 to 1.0).
  static constexpr int64_t kQaLmSteps = 2000;
  static TemporalLmSpec qa_scale() {
    TemporalLmSpec spec;
    spec.samples = 3000;
    spec.vocab_size = 512;
    spec.n_embd = 64;
    spec.block_size = 96;
    spec.micro_batch = 16;
    spec.total_batch = 1024;
    spec.warmup_steps = 10;
    spec.lm_steps = kQaLmSteps;
    return spec;
  }
};

struct TemporalFixture {
  std::unique_ptr<TempDir> dir;
  std::string samples;  // the temporal-data dir
  std::string lm;       // the LM's run dir
  std::string lm_hash;  // sha256 of its latest model.safetensors

  static constexpr const char* kGenerator = " --seed 5 --length 48 --length 64 --lm_text";

  // Makes the samples and trains the LM (gtest assertions: check HasFatalFailure() after).
  void build(const std::string& prefix, const TemporalLmSpec& spec = {}) {
    dir = std::make_unique<TempDir>(prefix);
    samples = dir->file("td");
    auto r = run_command(lmtrain_binary() + " temporal-data --num_samples " +
                         std::to_string(spec.samples) + " --output_dir " + samples + kGenerator +
                         spec.tasks);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(lmtrain_binary() + " prepare --input " + samples + "/lm_text.jsonl --output " +
                    dir->file("lm_data") + " --vocab_size " + std::to_string(spec.vocab_size));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    lm = dir->file("lm");
    r = run_command(
        lmtrain_binary() + " train --config " + source_dir() +
        "/configs/gpt2-tiny.yaml --model.n_layer=2 --model.n_head=2 --model.n_embd=" +
        std::to_string(spec.n_embd) + " --model.block_size=" + std::to_string(spec.block_size) +
        " --data.seq_len=64 --train.micro_batch_size=" + std::to_string(spec.micro_batch) +
        " --train.total_batch_size=" + std::to_string(spec.total_batch) +
        " --optim.warmup_steps=" + std::to_string(spec.warmup_steps) +
        " --train.threads=1 --train.eval_every=0 --checkpoint.every=0"
        " --train.max_steps=" +
        std::to_string(spec.lm_steps) + " --data.dir=" + dir->file("lm_data") + " --run.dir=" + lm);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    lm_hash = core::sha256_file_hex(lm + "/checkpoints/latest/model.safetensors");
  }

  // An encoder run's flags: a small encoder, rows of 96 tokens, 8 samples per step (of 456
  // training samples: 57 steps per epoch).
  std::string flags(const std::string& run, int64_t steps) const {
    return " --model.temporal.enabled=true --model.init_from=" + lm + "/checkpoints/latest" +
           " --data.temporal.dir=" + samples +
           " --model.temporal.max_length=64 --model.temporal.patch_len=16"
           " --model.temporal.stride=16 --model.temporal.layers=1 --model.temporal.width=32"
           " --model.temporal.heads=2 --data.seq_len=96 --train.micro_batch_size=8"
           " --train.total_batch_size=768 --optim.lr=3e-3 --optim.warmup_steps=2"
           " --train.threads=1 --log.every=1 --train.eval_every=0 --train.eval_batches=4"
           " --checkpoint.every=0 --train.max_steps=" +
           std::to_string(steps) + " --run.dir=" + run;
  }
};

}  // namespace lmtrain::testing
