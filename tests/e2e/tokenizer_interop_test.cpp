// Tokenizer interop with Hugging Face `tokenizers` / transformers (project venv), on a sample of
// more than 1 MiB: the fortune files plus synthetic blocks with invalid UTF-8, NUL and control
// bytes, unusual Unicode whitespace, combining marks, CJK and emoji (hf_check.py make-sample).
//
// Invalid UTF-8: `tokenizers` takes only Python str, so it cannot see raw bytes. Both sides are
// compared on the sample decoded with Python's errors='replace' (every invalid sequence ->
// U+FFFD), re-encoded as UTF-8: the Python side encodes that str, lmtrain encodes those bytes.
// On the raw bytes themselves lmtrain is lossless (invalid runs become byte tokens), which the
// last check here shows.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

class TokenizerInterop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_tok_interop");
    sample_ = dir_->file("sample.txt");
    auto r = run_hf_check("make-sample " + sample_ + " --min-bytes 1100000");
    if (r.exit_code != 0) throw std::runtime_error("make-sample failed:\n" + r.output);
    sample_bytes_ = check_result(r)["bytes"];
    data_ = dir_->file("data");
    auto p = run_command(lmtrain_binary() + " prepare --input " + sample_ + " --output " + data_ +
                         " --vocab_size 2048 --doc_separator %");
    if (p.exit_code != 0) throw std::runtime_error("prepare failed:\n" + p.output);
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::vector<uint32_t> read_ids(const std::string& path) {
    std::vector<uint32_t> ids;
    std::istringstream in(read_text(path));
    for (uint32_t id; in >> id;) ids.push_back(id);
    return ids;
  }
  // Python's ids for `tokenizer` on the sample vs `lmtrain tokenize` on the same text.
  static void expect_same_ids(const std::string& tokenizer, const std::string& name,
                              bool auto_tokenizer = false) {
    const std::string py_ids = dir_->file(name + ".py.ids"), text = dir_->file(name + ".txt");
    auto r = run_hf_check("tokenize " + tokenizer + " " + sample_ + " --out " + py_ids +
                          " --text-out " + text + (auto_tokenizer ? " --auto" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto stats = check_result(r);
    const std::string lm_ids = dir_->file(name + ".lm.ids");
    const std::string tok = auto_tokenizer ? tokenizer + "/tokenizer.json" : tokenizer;
    auto t = run_command(lmtrain_binary() + " tokenize --tokenizer " + tok + " --input " + text +
                         " --output " + lm_ids);
    ASSERT_EQ(t.exit_code, 0) << t.output;
    const auto theirs = read_ids(py_ids), ours = read_ids(lm_ids);
    size_t first = 0;
    while (first < theirs.size() && first < ours.size() && theirs[first] == ours[first]) ++first;
    EXPECT_EQ(first, std::max(theirs.size(), ours.size()))
        << "first difference at id #" << first << " of " << theirs.size() << " / " << ours.size();
    std::cout << name << ": " << ours.size() << " ids equal on " << stats["bytes"] << " bytes ("
              << stats["replaced"] << " U+FFFD from invalid UTF-8)\n";
  }

  static TempDir* dir_;
  static std::string sample_;
  static int64_t sample_bytes_;
  static std::string data_;  // prepared from the sample
};
TempDir* TokenizerInterop::dir_ = nullptr;
std::string TokenizerInterop::sample_;
int64_t TokenizerInterop::sample_bytes_ = 0;
std::string TokenizerInterop::data_;

TEST_F(TokenizerInterop, PreparedTokenizerLoadsInTokenizersWithTheSameIds) {
  ASSERT_GE(sample_bytes_, 1 << 20);
  expect_same_ids(data_ + "/tokenizer.json", "prepared");
}

// `lmtrain export hf` writes what AutoTokenizer needs (tokenizer.json + tokenizer_config.json).
TEST_F(TokenizerInterop, ExportedTokenizerLoadsInAutoTokenizerWithTheSameIds) {
  const std::string run = dir_->file("run"), hf = dir_->file("hf");
  auto t = run_command(lmtrain_binary() + " train --config " + source_dir() +
                       "/configs/gpt2-tiny.yaml --model.n_layer=1 --model.n_head=2"
                       " --model.n_embd=16 --model.block_size=32 --data.seq_len=32"
                       " --train.micro_batch_size=2 --train.total_batch_size=64"
                       " --train.max_steps=1 --train.eval_every=0 --train.threads=1 --data.dir=" +
                       data_ + " --run.dir=" + run);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto e = run_command(lmtrain_binary() + " export hf " + run + " " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  expect_same_ids(hf, "auto", /*auto_tokenizer=*/true);
}

TEST_F(TokenizerInterop, TokenizersTrainedByteLevelBpeReadByLmtrain) {
  // ByteLevel() with its default add_prefix_space=true, BPE model.
  const std::string tok = dir_->file("hf_trained.json");
  auto r = run_hf_check("train-tokenizer " + sample_ + " " + tok + " --vocab-size 2000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_ids(tok, "hf_trained");
}

TEST_F(TokenizerInterop, LmtrainEncodesRawBytesLosslessly) {
  const std::string ids = dir_->file("raw.ids");
  const std::string tok = " --tokenizer " + data_ + "/tokenizer.json";
  ASSERT_EQ(
      run_command(lmtrain_binary() + " tokenize" + tok + " --input " + sample_ + " --output " + ids)
          .exit_code,
      0);
  auto d = run_command(lmtrain_binary() + " tokenize" + tok + " --decode --input " + ids +
                       " --output " + dir_->file("raw.back"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_TRUE(read_text(dir_->file("raw.back")) == read_text(sample_));
}

// `tokenize --documents`: one line of ids per document, each document encoded on its own, the
// same at any thread count; --train_vocab_size trains prepare's tokenizer on the documents;
// --timing reports on stderr.
TEST_F(TokenizerInterop, TokenizeDocumentsAndTrainVocabulary) {
  const std::string tok = " --tokenizer " + data_ + "/tokenizer.json";
  const std::string docs = " --input " + sample_ + " --documents --doc_separator %";
  auto one = run_command(lmtrain_binary() + " tokenize" + tok + docs + " --threads 1 --timing" +
                         " --output " + dir_->file("docs1.ids"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto three = run_command(lmtrain_binary() + " tokenize" + tok + docs + " --threads 3" +
                           " --output " + dir_->file("docs3.ids"));
  ASSERT_EQ(three.exit_code, 0) << three.output;
  const std::string ids = read_text(dir_->file("docs1.ids"));
  EXPECT_EQ(read_text(dir_->file("docs3.ids")), ids);
  // The first fortune on its own gives the first line.
  const std::string sample = read_text(sample_);
  write_text(dir_->file("first.txt"), sample.substr(0, sample.find("\n%\n") + 1));
  auto first = run_command(lmtrain_binary() + " tokenize" + tok + " --input " +
                           dir_->file("first.txt") + " --output " + dir_->file("first.ids"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(read_text(dir_->file("first.ids")), ids.substr(0, ids.find('\n') + 1));
  size_t lines = 0, tokens = 0;
  std::istringstream in(ids);
  for (std::string line; std::getline(in, line); ++lines) {
    std::istringstream l(line);
    for (uint32_t id; l >> id;) ++tokens;
  }
  EXPECT_GT(lines, 1000u);
  EXPECT_TRUE(contains(one.output, "tokenize: encode seconds: ")) << one.output;
  EXPECT_TRUE(contains(one.output, " documents: " + std::to_string(lines) + " threads: 1 tokens: " +
                                       std::to_string(tokens) + " tokens_per_s: "))
      << one.output;

  const std::string trained = dir_->file("trained.json");
  auto t = run_command(lmtrain_binary() + " tokenize --train_vocab_size 600 --input " + sample_ +
                       " --doc_separator % --timing --output " + trained);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(contains(t.output, "tokenize: train seconds: ")) << t.output;
  EXPECT_TRUE(contains(t.output, "vocab: 600 merges: 343")) << t.output;
  const std::string with_trained = " tokenize --tokenizer " + trained + " --input ";
  auto e = run_command(lmtrain_binary() + with_trained + dir_->file("first.txt") + " --output " +
                       dir_->file("first.600.ids"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto d = run_command(lmtrain_binary() + with_trained + dir_->file("first.600.ids") +
                       " --decode --output " + dir_->file("first.back"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(read_text(dir_->file("first.back")), read_text(dir_->file("first.txt")));
  expect_refused(
      run_command(lmtrain_binary() + " tokenize" + tok + " --input " + sample_ + " --threads 2"),
      {"--threads needs --documents"});
}

}  // namespace
}  // namespace lmtrain::testing
