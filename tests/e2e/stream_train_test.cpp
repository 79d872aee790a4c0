// Training from a stream (data.source = stream) with the real binary on real files: the raw
// corpus, split into several files, tokenized on the fly by each rank. A run stopped and resumed
// is bitwise the uninterrupted one at 1 and 2 ranks (real processes on loopback); what a stream
// cannot go on from (another world size, other files, a prepared checkpoint) is refused naming
// why; the step log reports the loader's wait.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/sha256.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class StreamTrain : public ::testing::Test {
 protected:
  // The synthetic corpus (documents separated by "%" lines), prepared once for its tokenizer,
  // and dealt round-robin into six text files: the stream's units.
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_stream_train");
    data_ = prepare_synthetic_data(dir_->path());
    inputs_ = dir_->file("inputs");
    fs::create_directories(inputs_);
    std::ifstream in(dir_->file("corpus.txt"));
    std::vector<std::ofstream> parts;
    for (int i = 0; i < 6; ++i) parts.emplace_back(inputs_ + "/part" + std::to_string(i) + ".txt");
    std::string line, doc;
    int d = 0;
    while (std::getline(in, line)) {
      doc += line + "\n";
      if (line == "%") parts[static_cast<size_t>(d++ % 6)] << doc, doc.clear();
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.source=stream --data.stream.inputs=" + inputs_ +
           " --data.stream.doc_separator=% --data.stream.val_fraction=0.2 --data.dir=" + data_ +
           " --run.dir=" + run + " --train.max_steps=12 --train.eval_every=6";
  }
  static std::string launch(int nproc) {
    return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(nproc) +
           " --master_port=" + std::to_string(free_port()) + " -- train";
  }
  static std::string train_cmd(int nproc) {
    return nproc == 1 ? lmtrain_binary() + " train" : launch(nproc);
  }

  // Uninterrupted, and stopped at step 5 then resumed: the same losses, bit for bit, and the
  // same final weights and optimizer state, byte for byte.
  static void expect_resume_is_bitwise(int nproc, const std::string& extra) {
    const std::string a = dir_->file("whole" + std::to_string(nproc)),
                      b = dir_->file("resumed" + std::to_string(nproc));
    auto ra = run_command(train_cmd(nproc) + flags(a) + extra);
    ASSERT_EQ(ra.exit_code, 0) << ra.output;
    auto rb = run_command(train_cmd(nproc) + flags(b) + extra + " --train.stop_at_step=5");
    ASSERT_EQ(rb.exit_code, 0) << rb.output;
    auto rc = run_command(train_cmd(nproc) + flags(b) + extra + " --resume=auto");
    ASSERT_EQ(rc.exit_code, 0) << rc.output;
    EXPECT_TRUE(contains(rc.output, "resumed from")) << rc.output;

    const auto whole = step_records(a), resumed = step_records(b);
    ASSERT_EQ(whole.size(), 12u);
    ASSERT_EQ(resumed.size(), 12u);
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(whole[i]["loss"].get<double>(), resumed[i]["loss"].get<double>())
          << "step " << i + 1;
      // The loader's wait is in every step record of a stream.
      EXPECT_TRUE(whole[i].contains("data_wait_ms")) << whole[i].dump();
    }
    for (const char* f : {"model.safetensors", "optim.rank0.safetensors"}) {
      EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/" + f),
                core::sha256_file_hex(b + "/checkpoints/latest/" + f))
          << f;
    }
    // The checkpoint keeps each rank's own position in the stream.
    std::ifstream meta(b + "/checkpoints/latest/meta.json");
    const auto j = nlohmann::json::parse(meta);
    ASSERT_TRUE(j.contains("stream")) << j.dump();
    ASSERT_EQ(j["stream"]["positions"].size(), static_cast<size_t>(nproc));
    for (int r = 0; r < nproc; ++r) {
      EXPECT_EQ(j["stream"]["positions"][static_cast<size_t>(r)]["rank"].get<int>(), r);
    }
    // There is no global window cursor in a stream: the positions above are the run's place.
    EXPECT_EQ(j["data_cursor"].get<int64_t>(), 0) << j.dump();
  }

  static TempDir* dir_;
  static std::string data_, inputs_;
};
TempDir* StreamTrain::dir_ = nullptr;
std::string StreamTrain::data_, StreamTrain::inputs_;

TEST_F(StreamTrain, ResumedRunIsBitwiseTheUninterruptedOneOnOneRank) {
  // Two tokenizer threads and a short queue: the order of rows may not depend on either.
  expect_resume_is_bitwise(1, " --data.tokenizer_threads=2 --data.stream.queue_batches=2");
}

TEST_F(StreamTrain, ResumedRunIsBitwiseTheUninterruptedOneOnTwoRanks) {
  expect_resume_is_bitwise(2, "");
}

TEST_F(StreamTrain, LearnsAndReportsTheStreamAndItsWait) {
  const std::string run = dir_->file("learns");
  auto r = run_command(lmtrain_binary() + " train" + flags(run) + " --train.max_steps=40");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "data: stream of 6 file(s)")) << r.output;
  EXPECT_TRUE(contains(r.output, "stream loader: the steps waited")) << r.output;
  const auto records = step_records(run);
  ASSERT_EQ(records.size(), 40u);
  // From ln(384) ~ 5.95 at the start, the templated sentences are learnt quickly.
  EXPECT_LT(records.back()["loss"].get<double>(), records.front()["loss"].get<double>() - 1.0);
  // Evaluated on the held-out files.
  std::ifstream in(run + "/metrics.jsonl");
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_TRUE(contains(all.str(), "val_loss")) << all.str();
}

TEST_F(StreamTrain, WhatAStreamCannotGoOnFromIsRefused) {
  const std::string run = dir_->file("refusals");
  auto first = run_command(lmtrain_binary() + " train" + flags(run) + " --train.stop_at_step=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Another world size: each rank's position covers that world size's units only.
  expect_refused(run_command(launch(2) + flags(run) + " --resume=auto"),
                 {"saved by a streaming run of 1 rank(s); this run has 2",
                  "resumes at the world size it was saved at"});
  // Other input files.
  const std::string fewer = dir_->file("fewer");
  fs::create_directories(fewer);
  for (int i = 0; i < 4; ++i) {
    fs::copy_file(inputs_ + "/part" + std::to_string(i) + ".txt",
                  fewer + "/part" + std::to_string(i) + ".txt");
  }
  expect_refused(run_command(lmtrain_binary() + " train" + flags(run) +
                             " --data.stream.inputs=" + fewer + " --resume=auto"),
                 {"streamed from other input files"});
  // The same checkpoint resumed from prepared windows, and a prepared one from a stream.
  expect_refused(run_command(lmtrain_binary() + " train" + flags(run) +
                             " --data.source=prepared --resume=auto"),
                 {"was trained with data.source = stream"});
  const std::string prepared = dir_->file("prepared");
  auto p = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + prepared + " --train.max_steps=2");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  expect_refused(run_command(lmtrain_binary() + " train" + flags(prepared) + " --resume=auto"),
                 {"trained on prepared windows", "--model.init_from="});
}

TEST_F(StreamTrain, IncompleteOrConflictingConfigsAreRefusedNamingTheKey) {
  const std::string run = dir_->file("bad");
  const std::string base = lmtrain_binary() + " train" + flags(run);
  expect_refused(run_command(base + " --data.stream.inputs="), {"data.stream.inputs"});
  expect_refused(run_command(base + " --data.stream.inputs=" + dir_->file("nowhere")),
                 {"does not exist", "nowhere"});
  expect_refused(run_command(base + " --data.dir= --data.stream.tokenizer="),
                 {"data.stream.tokenizer"});
  expect_refused(run_command(base + " --train.max_steps=0 --train.epochs=1"),
                 {"train.max_steps", "train.epochs"});
  expect_refused(run_command(base + " --checkpoint.every_epoch=true"), {"checkpoint.every_epoch"});
  expect_refused(run_command(base + " --distill.enabled=true"), {"distill.enabled"});
  // More ranks than units: a rank would have nothing to read.
  expect_refused(run_command(launch(2) + flags(run) + " --data.stream.inputs=" + inputs_ +
                             "/part0.txt --data.stream.val_fraction=0"),
                 {"1 training unit(s)", "for 2 ranks"});
}

// A run stopped at step 2: what the resume refusals below start from.
void stop_stream_run_at_step_2(const std::string& flags) {
  auto r = run_command(lmtrain_binary() + " train" + flags + " --train.stop_at_step=2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(StreamTrain, ValFractionZeroHoldsOutNoUnitAndIsNotEvaluated) {
  const std::string run = dir_->file("no_val");
  auto r = run_command(lmtrain_binary() + " train" + flags(run) +
                       " --data.stream.val_fraction=0 --train.max_steps=3 --train.eval_every=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "6 training unit(s), 0 validation unit(s)")) << r.output;
  EXPECT_TRUE(contains(r.output, "the run is not evaluated")) << r.output;
  EXPECT_FALSE(contains(read_text(run + "/metrics.jsonl"), "val_loss"));
}

TEST_F(StreamTrain, EmptyFilesAndUnitsWithoutADocumentDoNotStopAFreshRun) {
  // A 0-byte file and a file of separators only, first in the listed order (no shuffle), so the
  // first unit rank 0 reads holds no document.
  const std::string inputs = dir_->file("with_empty");
  fs::create_directories(inputs);
  write_text(inputs + "/0blank.txt", "%\n\n%\n");
  write_text(inputs + "/0empty.txt", "");
  for (int i = 0; i < 6; ++i) {
    const std::string part = "/part" + std::to_string(i) + ".txt";
    fs::copy_file(inputs_ + part, inputs + part);
  }
  const std::string run = dir_->file("empty_units");
  auto r =
      run_command(lmtrain_binary() + " train" + flags(run) + " --data.stream.inputs=" + inputs +
                  " --data.shuffle=false --train.max_steps=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "stream of 7 file(s) (1 empty skipped)")) << r.output;
  EXPECT_EQ(step_records(run).size(), 3u);
  // A rank whose units hold no document at all is told so, with the counts.
  const std::string blank = dir_->file("all_blank");
  fs::create_directories(blank);
  write_text(blank + "/a.txt", "%\n%\n");
  write_text(blank + "/b.txt", "\n\n");
  auto none = run_command(lmtrain_binary() + " train" + flags(dir_->file("blank_run")) +
                          " --data.stream.inputs=" + blank + " --data.stream.val_fraction=0");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_TRUE(contains(none.output, "rank 0 of 1 has no document to read: its 2 unit(s) of 2"))
      << none.output;
  EXPECT_FALSE(contains(none.output, "input files changed")) << none.output;
}

TEST_F(StreamTrain, AMissingTextFieldNamesTheStreamKey) {
  const std::string inputs = dir_->file("jsonl_body");
  fs::create_directories(inputs);
  for (const char* f : {"/a.jsonl", "/b.jsonl"}) {
    write_text(inputs + f, "{\"body\": \"the cat sat\"}\n{\"body\": \"a dog ran\"}\n");
  }
  auto r = run_command(lmtrain_binary() + " train" + flags(dir_->file("no_text")) +
                       " --data.stream.inputs=" + inputs + " --data.stream.doc_separator=");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "no \"text\" field (name the text field with "
                       "data.stream.text_column"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "--text_column NAME")) << r.output;
}

TEST_F(StreamTrain, AResumeWithAnotherTokenizerNamesDataStreamTokenizer) {
  const std::string run = dir_->file("tok_run");
  stop_stream_run_at_step_2(flags(run));
  // data.dir's tokenizer less its last merge: it loads, and it is another tokenizer.
  auto tok = nlohmann::json::parse(read_text(data_ + "/tokenizer.json"));
  tok["model"]["merges"].erase(tok["model"]["merges"].size() - 1);
  const std::string other = dir_->file("other_tokenizer.json");
  write_text(other, tok.dump());
  auto r = run_command(lmtrain_binary() + " train" + flags(run) +
                       " --data.stream.tokenizer=" + other + " --resume=auto");
  expect_refused(r, {"different tokenizer", "than data.stream.tokenizer = " + other});
  EXPECT_FALSE(contains(r.output, "than data.dir")) << r.output;
}

TEST_F(StreamTrain, AResumeWithChangedUnitSettingsNamesTheKeyBeforeResuming) {
  const std::string run = dir_->file("settings_run");
  stop_stream_run_at_step_2(flags(run));
  const std::pair<const char*, const char*> changes[] = {
      {" --data.stream.block_mb=1", "data.stream.block_mb = 64 (this run: 1)"},
      {" --data.stream.val_fraction=0.3", "data.stream.val_fraction = 0.2 (this run: 0.3)"},
      {" --train.seed=7", "train.seed = 1337 (this run: 7)"}};
  for (const auto& [flag, saved] : changes) {
    auto r = run_command(lmtrain_binary() + " train" + flags(run) + flag + " --resume=auto");
    expect_refused(r, {std::string("was streamed with ") + saved, "resume with --"});
    EXPECT_FALSE(contains(r.output, "resumed from")) << r.output;
    EXPECT_FALSE(contains(r.output, "paths or sizes differ")) << r.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
