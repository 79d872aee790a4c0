// `lmtrain prepare` as a process: killed mid-way and resumed, refusing bad input with the file's
// name, and its multi-piece output trained on like a one-file data dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// Every file of a prepared dir but prepare.json (it records timings) and the lock.
std::map<std::string, std::string> prepared_dir_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "prepare.json" || name == ".lock") continue;
    out[name] = read_text(e.path().string());
  }
  return out;
}

class PrepareE2E : public ::testing::Test {
 protected:
  void SetUp() override { corpus_ = write_synthetic_corpus(dir_.path(), 600, 7); }
  std::string prepare(const std::string& out, const std::string& extra = "") {
    return lmtrain_binary() + " prepare --input " + corpus_ + " --output " + out +
           " --vocab_size 384 --doc_separator % --val_fraction 0.1 --shard_tokens 1500"
           " --progress_seconds 0" +
           extra;
  }
  TempDir dir_{"lmtrain_prepare_e2e"};
  std::string corpus_;
};

// A prepare killed (SIGKILL) after its second piece leaves nothing at the output; run again, it
// goes on from the journal and ends with the bytes an uninterrupted prepare writes, at another
// thread count too.
TEST_F(PrepareE2E, KilledPrepareResumesToTheSameBytes) {
  const std::string whole = dir_.file("whole"), resumed = dir_.file("resumed");
  auto r = run_command(prepare(whole));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = nlohmann::json::parse(read_text(whole + "/prepare.json"));
  ASSERT_GE(summary["pieces"]["train"].get<int>(), 4) << summary.dump();
  EXPECT_TRUE(contains(r.output, "prepare: encoding")) << r.output;  // progress lines
  EXPECT_TRUE(contains(r.output, "MB/s")) << r.output;

  r = run_command("LMTRAIN_FAULT_KILL=0:2 " + prepare(resumed, " --threads 1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "LMTRAIN_FAULT_KILL=0:2")) << r.output;
  EXPECT_FALSE(fs::exists(resumed)) << "a killed prepare must leave no output";
  const std::string partial = dir_.file(".resumed.partial");
  EXPECT_TRUE(fs::exists(partial + "/train_00001.bin"));
  EXPECT_TRUE(fs::exists(partial + "/prepare.journal"));

  r = run_command(prepare(resumed, " --threads 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resumed after 2 finished pieces")) << r.output;
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(prepared_dir_bytes(resumed), prepared_dir_bytes(whole));
  const auto again = nlohmann::json::parse(read_text(resumed + "/prepare.json"));
  EXPECT_EQ(again["tokens"], summary["tokens"]);
  EXPECT_EQ(again["resumed_pieces"], 2);

  // Killed again, then run with other flags: the partial work is not theirs, so it starts over.
  const std::string other = dir_.file("other");
  r = run_command("LMTRAIN_FAULT_KILL=0:1 " + prepare(other));
  EXPECT_NE(r.exit_code, 0) << r.output;
  r = run_command(prepare(other, " --seed 5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "starting over")) << r.output;
  EXPECT_FALSE(contains(r.output, "resumed after")) << r.output;
  r = run_command(prepare(dir_.file("fresh5"), " --seed 5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(prepared_dir_bytes(other), prepared_dir_bytes(dir_.file("fresh5")));
}

// data.source=prepared over pieces: training reads the pieces as one sequence, and a one-file
// dir (what prepare wrote before pieces) of the same tokens trains identically, window for
// window.
TEST_F(PrepareE2E, PiecesAndOneFileTrainTheSame) {
  const std::string pieces = dir_.file("pieces"), one = dir_.file("one");
  auto r = run_command(prepare(pieces));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = nlohmann::json::parse(read_text(pieces + "/prepare.json"));
  const int n = summary["pieces"]["train"].get<int>();
  ASSERT_GE(n, 4);
  // The same tokens as one train.bin / val.bin: concatenate the pieces' token data.
  fs::create_directories(one);
  fs::copy_file(pieces + "/tokenizer.json", one + "/tokenizer.json");
  for (const std::string split : {"train", "val"}) {
    std::string header, data;
    uint64_t tokens = 0;
    for (int k = 0; k < n; ++k) {
      char name[32];
      std::snprintf(name, sizeof(name), "%s_%05d.bin", split.c_str(), k);
      const std::string bytes = read_text(pieces + "/" + name);
      if (k == 0) header = bytes.substr(0, 64);
      data += bytes.substr(64);
      tokens += (bytes.size() - 64) / 2;
    }
    for (int b = 0; b < 8; ++b) header[16 + b] = static_cast<char>((tokens >> (8 * b)) & 0xFF);
    write_text(one + "/" + split + ".bin", header + data);
  }
  const std::string train =
      lmtrain_binary() + " train" + tiny_train_flags() + " --train.max_steps=6";
  r = run_command(train + " --data.dir=" + pieces + " --run.dir=" + dir_.file("run_pieces"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(train + " --data.dir=" + one + " --run.dir=" + dir_.file("run_one"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = logged_losses(dir_.file("run_pieces")), b = logged_losses(dir_.file("run_one"));
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a, b);
  // eval reads the pieces of the val split.
  r = run_command(lmtrain_binary() + " eval --checkpoint " + dir_.file("run_pieces") +
                  " --split val --batches 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "val loss")) << r.output;
}

TEST_F(PrepareE2E, BadInputIsRefusedNamingTheFileAndLine) {
  write_text(dir_.file("bad.jsonl"), "{\"text\": \"fine\"}\n{\"text\": \"broken\n");
  auto r = run_command(lmtrain_binary() + " prepare --input " + dir_.file("bad.jsonl") +
                       " --output " + dir_.file("out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // bad data, not a usage error
  EXPECT_TRUE(contains(r.output, dir_.file("bad.jsonl") + ":2")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.file("out")));

  write_text(dir_.file("t.parquet"), "PAR1 not a parquet file PAR1");
  r = run_command(lmtrain_binary() + " prepare --input " + dir_.file("t.parquet") + " --output " +
                  dir_.file("out"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, dir_.file("t.parquet"))) << r.output;
  EXPECT_FALSE(fs::exists(dir_.file("out")));

  // The output may not lie inside an input.
  r = run_command(lmtrain_binary() + " prepare --input " + dir_.path() + " --output " +
                  dir_.file("inside"));
  expect_refused(r, {"lies inside this command's input"});
}

// One book read in pieces (--max_document_bytes) and split by position (issue 38, item 25): a
// prepare killed after its second piece resumes in the middle of the document, where the
// pieces' offsets in it must be found again, and ends with the bytes of an uninterrupted one.
TEST_F(PrepareE2E, KilledOneFilePrepareResumesToTheSameBytes) {
  std::string book;
  for (int i = 0; i < 3000; ++i) book += "Line " + std::to_string(i * 7919 % 10007) + " here.\n";
  write_text(dir_.file("book.txt"), book);
  const std::string cmd = lmtrain_binary() + " prepare --input " + dir_.file("book.txt") +
                          " --vocab_size 300 --max_document_bytes 2048 --shard_tokens 3000" +
                          " --progress_seconds 0 --output ";
  auto r = run_command(cmd + dir_.file("book_whole"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "splitting by position instead")) << r.output;
  r = run_command("LMTRAIN_FAULT_KILL=0:2 " + cmd + dir_.file("book_resumed") + " --threads 1");
  ASSERT_NE(r.exit_code, 0) << r.output;
  r = run_command(cmd + dir_.file("book_resumed"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resumed after 2 finished pieces")) << r.output;
  EXPECT_EQ(prepared_dir_bytes(dir_.file("book_resumed")),
            prepared_dir_bytes(dir_.file("book_whole")));
  const auto summary = nlohmann::json::parse(read_text(dir_.file("book_whole/prepare.json")));
  EXPECT_EQ(summary["documents"]["total"], 1);
  EXPECT_GE(summary["pieces"]["train"].get<int>(), 4);
}

// Invalid UTF-8 and a lone surrogate in a JSONL line are bad data: exit 1 like every other data
// error (README, exit codes), naming the file, the line and what is wrong; 2 is for usage.
TEST_F(PrepareE2E, InvalidUtf8AndLoneSurrogatesInJsonlAreBadDataExitingOne) {
  const std::pair<std::string, std::string> cases[] = {
      {"utf8.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"bad \xFF byte\"}\n"},
      {"surrogate.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"lone \\ud800 half\"}\n"},
  };
  for (const auto& [name, text] : cases) {
    write_text(dir_.file(name), text);
    auto r = run_command(lmtrain_binary() + " prepare --input " + dir_.file(name) + " --output " +
                         dir_.file("out_" + name));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, dir_.file(name) + ":2: not valid JSON")) << r.output;
    EXPECT_TRUE(contains(r.output, name == "utf8.jsonl" ? "ill-formed UTF-8" : "surrogate"))
        << r.output;
    EXPECT_FALSE(fs::exists(dir_.file("out_" + name)));
  }
}

// A resumed prepare hashes its inputs again: an input edited in place with its size and mtime
// kept is caught, the interrupted work is dropped, and the output and prepare.json's sha256 are
// the edited text's, byte for byte what a fresh prepare of it writes.
TEST_F(PrepareE2E, ResumeNoticesAnInputEditedInPlaceWithSizeAndMtimeKept) {
  const std::string out = dir_.file("edited");
  auto r = run_command("LMTRAIN_FAULT_KILL=0:1 " + prepare(out));
  ASSERT_NE(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(dir_.file(".edited.partial/train_00000.bin")));
  const auto mtime = fs::last_write_time(corpus_);
  std::string text = read_text(corpus_);
  const size_t size = text.size();
  for (size_t at = 0; (at = text.find("the", at)) != std::string::npos; at += 3) text[at] = 'T';
  write_text(corpus_, text);
  fs::last_write_time(corpus_, mtime);
  ASSERT_EQ(fs::file_size(corpus_), size);

  r = run_command(prepare(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "input " + corpus_ + " changed since the interrupted prepare"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "resumed after")) << r.output;
  r = run_command(prepare(dir_.file("fresh")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(prepared_dir_bytes(out), prepared_dir_bytes(dir_.file("fresh")));
  const auto summary = nlohmann::json::parse(read_text(out + "/prepare.json"));
  auto sum = run_command("sha256sum " + corpus_);
  ASSERT_EQ(sum.exit_code, 0) << sum.output;
  EXPECT_EQ(summary["input_files"][0]["sha256"].get<std::string>(), sum.output.substr(0, 64));
}

}  // namespace
}  // namespace lmtrain::testing
