#include "data/prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/token_shard.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using lmtrain::testing::read_text;
using lmtrain::testing::TempDir;
using lmtrain::testing::write_text;
namespace fs = std::filesystem;

// Splits a shard into documents at <|endoftext|> and decodes each.
std::vector<std::string> decode_documents(const std::string& path, const BpeTokenizer& tok) {
  TokenShard shard(path);
  EXPECT_EQ(shard.tokenizer_hash(), tok.hash());
  std::vector<std::string> docs;
  std::vector<uint32_t> cur;
  for (size_t i = 0; i < shard.size(); ++i) {
    const uint32_t id = shard.at(i);
    if (id == tok.eot_id()) {
      docs.push_back(tok.decode(cur));
      cur.clear();
    } else {
      cur.push_back(id);
    }
  }
  EXPECT_TRUE(cur.empty()) << "shard must end with <|endoftext|>";
  return docs;
}

struct Corpus {
  TempDir dir{"lmtrain_prepare"};
  std::vector<std::string> expected_docs;

  Corpus() {
    fs::create_directories(dir.file("in/sub"));
    // Fortune-style file: "%" lines separate documents; the empty one is dropped.
    write_text(dir.file("in/sayings"),
               "A fool and his money are soon parted.\n%\nThe early bird gets the worm.\n"
               "  -- Proverb\n%\n%\nNo news is good news.\n");
    expected_docs.insert(expected_docs.end(), {"A fool and his money are soon parted.\n",
                                               "The early bird gets the worm.\n  -- Proverb\n",
                                               "No news is good news.\n"});
    write_text(dir.file("in/sub/more.txt"),
               "Time flies like an arrow.\n%\nFruit flies like a "
               "banana.\n");
    expected_docs.insert(expected_docs.end(),
                         {"Time flies like an arrow.\n", "Fruit flies like a banana.\n"});
    write_text(dir.file("in/sub/data.jsonl"),
               "{\"text\": \"First JSON document.\"}\n\n"
               "{\"text\": \"Second one, with \\u00e9 and a\\nnewline.\", \"id\": 2}\n"
               "{\"text\": \"\"}\n");
    expected_docs.insert(expected_docs.end(),
                         {"First JSON document.", "Second one, with \xC3\xA9 and a\nnewline."});
    write_text(dir.file("in/blob.bin"), std::string("\x7f"
                                                    "ELF\0\0\0binary",
                                                    13));
    // A symlink to a file already included is read once.
    fs::create_symlink("sayings", dir.file("in/sayings.u8"));
  }

  PrepareOptions options() const {
    PrepareOptions o;
    o.inputs = {dir.file("in")};
    o.output_dir = dir.file("out");
    o.vocab_size = 300;
    o.val_fraction = 0.3;
    o.doc_separator = "%";
    return o;
  }
};

TEST(PrepareTest, EndToEnd) {
  Corpus c;
  const PrepareOptions opt = c.options();
  const PrepareResult r = run_prepare(opt);

  EXPECT_EQ(r.num_files, 3u);
  ASSERT_EQ(r.skipped_files.size(), 1u);
  EXPECT_NE(r.skipped_files[0].find("blob.bin"), std::string::npos);
  EXPECT_EQ(r.num_documents, c.expected_docs.size());
  EXPECT_EQ(r.num_val_documents, 2u);  // round(0.3 * 7)
  EXPECT_EQ(r.num_train_documents + r.num_val_documents, r.num_documents);
  for (const std::string& f : {r.tokenizer_path, r.train_path, r.val_path, r.summary_path}) {
    EXPECT_TRUE(fs::exists(f)) << f;
  }

  const BpeTokenizer tok = BpeTokenizer::load_hf(r.tokenizer_path);
  EXPECT_EQ(tok.hash(), r.tokenizer_hash);
  EXPECT_EQ(tok.vocab_size(), r.vocab_size);
  EXPECT_LE(r.vocab_size, 300u);
  EXPECT_EQ(TokenShard(r.train_path).size(), r.train_tokens);
  EXPECT_EQ(TokenShard(r.val_path).size(), r.val_tokens);
  EXPECT_EQ(TokenShard(r.train_path).dtype_bytes(), 2);

  const auto train = decode_documents(r.train_path, tok);
  const auto val = decode_documents(r.val_path, tok);
  EXPECT_EQ(train.size(), r.num_train_documents);
  EXPECT_EQ(val.size(), r.num_val_documents);
  std::vector<std::string> all = train;
  all.insert(all.end(), val.begin(), val.end());
  std::sort(all.begin(), all.end());
  std::vector<std::string> expected = c.expected_docs;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);

  const auto summary = nlohmann::json::parse(read_text(r.summary_path));
  EXPECT_EQ(summary["documents"]["total"], r.num_documents);
  EXPECT_EQ(summary["tokens"]["train"], r.train_tokens);
  EXPECT_EQ(summary["tokens"]["val"], r.val_tokens);
  EXPECT_EQ(summary["tokenizer_hash"], r.tokenizer_hash);
  EXPECT_EQ(summary["seed"], 1337);

  // Same inputs and seed -> byte-identical outputs.
  PrepareOptions again = opt;
  again.output_dir = c.dir.file("out2");
  again.num_threads = 1;
  const PrepareResult r2 = run_prepare(again);
  EXPECT_EQ(read_text(r2.train_path), read_text(r.train_path));
  EXPECT_EQ(read_text(r2.val_path), read_text(r.val_path));
  EXPECT_EQ(read_text(r2.tokenizer_path), read_text(r.tokenizer_path));
}

TEST(PrepareTest, MissingInputIsUsageErrorNamingThePath) {
  Corpus c;
  PrepareOptions opt = c.options();
  opt.inputs.push_back(c.dir.file("no/such/file.txt"));
  try {
    run_prepare(opt);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/file.txt"), std::string::npos) << e.what();
  }
}

TEST(PrepareTest, MalformedJsonlLineNamesFileAndLine) {
  Corpus c;
  write_text(c.dir.file("in/bad.jsonl"), "{\"text\": \"ok\"}\n{\"text\": 5}\n");
  try {
    run_prepare(c.options());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(PrepareTest, BadOptionsAreUsageErrors) {
  Corpus c;
  PrepareOptions opt = c.options();
  opt.val_fraction = 1.0;
  EXPECT_THROW(run_prepare(opt), UsageError);
  opt = c.options();
  opt.vocab_size = 200;
  EXPECT_THROW(run_prepare(opt), UsageError);
  // A single document cannot be split into train and val.
  write_text(c.dir.file("one.txt"), "just one document");
  opt = c.options();
  opt.inputs = {c.dir.file("one.txt")};
  EXPECT_THROW(run_prepare(opt), UsageError);
}

}  // namespace
}  // namespace lmtrain::data
