#include "data/prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/sha256.h"
#include "data/bpe_tokenizer.h"
#include "data/corpus/byte_source.h"
#include "data/corpus/corpus_test_util.h"
#include "data/token_split.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using lmtrain::testing::gzip_bytes;
using lmtrain::testing::read_text;
using lmtrain::testing::TempDir;
using lmtrain::testing::write_parquet;
using lmtrain::testing::write_text;
using lmtrain::testing::zstd_bytes;
namespace fs = std::filesystem;

// Splits a split's pieces into documents at <|endoftext|> and decodes each.
std::vector<std::string> decode_split(const std::vector<std::string>& paths,
                                      const BpeTokenizer& tok) {
  const TokenSplit split(paths);
  EXPECT_EQ(split.tokenizer_hash(), tok.hash());
  std::vector<std::string> docs;
  std::vector<uint32_t> cur;
  for (size_t i = 0; i < split.size(); ++i) {
    const uint32_t id = split.at(i);
    if (id == tok.eot_id()) {
      docs.push_back(tok.decode(cur));
      cur.clear();
    } else {
      cur.push_back(id);
    }
  }
  EXPECT_TRUE(cur.empty()) << "a split must end with <|endoftext|>";
  return docs;
}

// Every file of a prepared dir but prepare.json (timings) and the lock, by name.
std::map<std::string, std::string> prepared_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "prepare.json" || name == ".lock") continue;
    out[name] = read_text(e.path().string());
  }
  return out;
}

struct PrepareCorpus {
  TempDir dir{"lmtrain_prepare"};
  std::vector<std::string> expected_docs;

  PrepareCorpus() {
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
    write_text(dir.file("in/sub/zipped.jsonl.zst"),
               zstd_bytes("{\"text\": \"Compressed words travel light.\"}\n"
                          "{\"text\": \"So do compressed lines.\"}\n"));
    expected_docs.insert(expected_docs.end(),
                         {"Compressed words travel light.", "So do compressed lines."});
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
    o.progress = [](const PrepareProgress&) {};
    return o;
  }
};

TEST(PrepareTest, EndToEnd) {
  PrepareCorpus c;
  const PrepareOptions opt = c.options();
  const PrepareResult r = run_prepare(opt);

  EXPECT_EQ(r.num_files, 4u);
  ASSERT_EQ(r.skipped_files.size(), 1u);
  EXPECT_NE(r.skipped_files[0].find("blob.bin"), std::string::npos);
  EXPECT_EQ(r.num_documents, c.expected_docs.size());
  EXPECT_GE(r.num_val_documents, 1u);
  EXPECT_GE(r.num_train_documents, 1u);
  EXPECT_EQ(r.num_train_documents + r.num_val_documents, r.num_documents);
  EXPECT_EQ(r.num_pieces, 1u);
  EXPECT_FALSE(r.resumed);
  for (const std::string& f :
       {r.tokenizer_path, r.summary_path, r.train_paths.at(0), r.val_paths.at(0)}) {
    EXPECT_TRUE(fs::exists(f)) << f;
  }
  EXPECT_FALSE(fs::exists(c.dir.file(".out.partial")));
  EXPECT_FALSE(fs::exists(c.dir.file("out/prepare.journal")));

  const BpeTokenizer tok = BpeTokenizer::load_hf(r.tokenizer_path);
  EXPECT_EQ(tok.hash(), r.tokenizer_hash);
  EXPECT_EQ(tok.vocab_size(), r.vocab_size);
  EXPECT_LE(r.vocab_size, 300u);
  const TokenSplit train = TokenSplit::open(c.dir.file("out"), "train");
  EXPECT_EQ(train.size(), r.train_tokens);
  EXPECT_EQ(TokenSplit::open(c.dir.file("out"), "val").size(), r.val_tokens);
  EXPECT_EQ(train.dtype_bytes(), 2);

  const auto train_docs = decode_split(r.train_paths, tok);
  const auto val_docs = decode_split(r.val_paths, tok);
  EXPECT_EQ(train_docs.size(), r.num_train_documents);
  EXPECT_EQ(val_docs.size(), r.num_val_documents);
  std::vector<std::string> all = train_docs;
  all.insert(all.end(), val_docs.begin(), val_docs.end());
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
  EXPECT_EQ(summary["pieces"]["train"], 1);
  // Every input file with its size and sha256, the skipped one marked.
  const auto& files = summary["input_files"];
  ASSERT_EQ(files.size(), 5u);
  bool saw_zst = false;
  for (const auto& f : files) {
    const std::string path = f["path"];
    EXPECT_EQ(f["size"], fs::file_size(path)) << path;
    EXPECT_EQ(f["sha256"], core::sha256_file_hex(path)) << path;
    if (path.find("blob.bin") != std::string::npos) {
      EXPECT_EQ(f["skipped"], "binary");
    }
    if (path.find("zipped.jsonl.zst") != std::string::npos) {
      EXPECT_EQ(f["format"], "jsonl.zst");
      saw_zst = true;
    }
  }
  EXPECT_TRUE(saw_zst);

  // Same inputs and seed -> byte-identical outputs.
  PrepareOptions again = opt;
  again.output_dir = c.dir.file("out2");
  again.num_threads = 1;
  run_prepare(again);
  EXPECT_EQ(prepared_bytes(c.dir.file("out2")), prepared_bytes(c.dir.file("out")));
}

// One corpus written as text (with separators), JSONL, JSONL.gz, JSONL.zst and parquet (by
// pyarrow, several row groups) prepares into identical tokenizers and shards.
TEST(PrepareTest, EveryFormatGivesIdenticalShards) {
  TempDir dir("lmtrain_prepare_formats");
  std::vector<std::string> docs;
  const std::vector<std::string> words = {"river", "stone", "light", "caf\xC3\xA9", "\xE6\x9D\xB1",
                                          "run",   "sings", "old",   "42",          "!"};
  for (int i = 0; i < 300; ++i) {
    std::string d;
    for (int k = 0; k < 5 + (i * 7) % 30; ++k) d += words[(i * 31 + k * 17) % words.size()] + " ";
    docs.push_back(d + "\n");  // the text form keeps each document's last '\n'
  }
  std::string text, jsonl;
  for (const auto& d : docs) {
    text += d + "%\n";
    jsonl += nlohmann::json{{"text", d}}.dump() + "\n";
  }
  write_text(dir.file("c.txt"), text);
  write_text(dir.file("c.jsonl"), jsonl);
  write_text(dir.file("c.jsonl.gz"), gzip_bytes(jsonl));
  write_text(dir.file("c.jsonl.zst"), zstd_bytes(jsonl));
  std::vector<std::string> names = {"c.txt", "c.jsonl", "c.jsonl.gz", "c.jsonl.zst"};
  if (testing::parquet_built()) {
    ASSERT_EQ(write_parquet(dir.file("c.parquet"),
                            std::vector<std::optional<std::string>>(docs.begin(), docs.end()), 64),
              5);
    names.push_back("c.parquet");
  }
  std::map<std::string, std::string> first;
  for (const std::string& name : names) {
    PrepareOptions o;
    o.inputs = {dir.file(name)};
    o.output_dir = dir.file("out_" + name);
    o.vocab_size = 320;
    o.val_fraction = 0.1;
    o.doc_separator = "%";
    o.shard_tokens = 1500;  // several pieces
    o.progress = [](const PrepareProgress&) {};
    const auto r = run_prepare(o);
    EXPECT_EQ(r.num_documents, docs.size()) << name;
    EXPECT_GE(r.num_pieces, 3u) << name;
    const auto bytes = prepared_bytes(o.output_dir);
    if (first.empty()) {
      first = bytes;
    } else {
      EXPECT_EQ(bytes, first) << name << " differs from c.txt";
    }
  }
}

// The thread count changes nothing in the output, and pieces are cut by token count.
TEST(PrepareTest, OutputIsTheSameAtAnyThreadCount) {
  PrepareCorpus c;
  // More documents, so that several chunks are in flight at once.
  std::string many;
  for (int i = 0; i < 400; ++i) {
    many += "Document number " + std::to_string(i) + " tells of " +
            std::string(static_cast<size_t>(i % 9) + 1, 'a') + " and more.\n%\n";
  }
  write_text(c.dir.file("in/many.txt"), many);
  std::map<std::string, std::string> one;
  for (int threads : {1, 2, 3}) {
    PrepareOptions o = c.options();
    o.num_threads = threads;
    o.chunk_bytes = 97;  // many small chunks
    o.shard_tokens = 1000;
    o.output_dir = c.dir.file("out" + std::to_string(threads));
    const auto r = run_prepare(o);
    EXPECT_GE(r.num_pieces, 3u);
    const auto summary = nlohmann::json::parse(read_text(r.summary_path));
    for (size_t k = 0; k + 1 < r.num_pieces; ++k) {
      EXPECT_GE(summary["piece_tokens"][k]["train"].get<uint64_t>(), 1000u);
    }
    const auto bytes = prepared_bytes(o.output_dir);
    if (threads == 1) {
      one = bytes;
    } else {
      EXPECT_EQ(bytes, one) << threads << " threads";
    }
  }
}

// BPE trains on a sample no larger than --tokenizer_train_bytes, and the memory a reader held
// stays within its buffers.
TEST(PrepareTest, TokenizerSampleAndReaderMemoryAreBounded) {
  PrepareCorpus c;
  std::string many;
  for (int i = 0; i < 300; ++i) many += "{\"text\": \"sample text " + std::to_string(i) + "\"}\n";
  write_text(c.dir.file("in/many.jsonl.gz"), gzip_bytes(many));
  PrepareOptions o = c.options();
  o.tokenizer_train_bytes = 600;
  o.max_document_bytes = 4096;
  const auto r = run_prepare(o);
  const auto summary = nlohmann::json::parse(read_text(r.summary_path));
  const auto& sample = summary["tokenizer_sample"];
  EXPECT_LE(sample["bytes"].get<uint64_t>(), 600u);
  EXPECT_GT(sample["documents"].get<uint64_t>(), 10u);
  EXPECT_LT(sample["documents"].get<uint64_t>(), r.num_train_documents);
  EXPECT_GT(r.peak_reader_bytes, 0u);
  EXPECT_LE(r.peak_reader_bytes, 2 * kDefaultReadBufferBytes + 4096);
}

TEST(PrepareTest, MissingInputIsUsageErrorNamingThePath) {
  PrepareCorpus c;
  PrepareOptions opt = c.options();
  opt.inputs.push_back(c.dir.file("no/such/file.txt"));
  try {
    run_prepare(opt);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/file.txt"), std::string::npos) << e.what();
  }
}

TEST(PrepareTest, BadInputsAreNamed) {
  PrepareCorpus c;
  auto message = [&](const std::string& name, const std::string& bytes,
                     const std::string& column = "text") {
    TempDir d("lmtrain_prepare_bad");
    write_text(d.file(name), bytes);
    PrepareOptions opt = c.options();
    opt.inputs = {d.file(name)};
    opt.output_dir = d.file("out");
    opt.text_column = column;
    try {
      run_prepare(opt);
    } catch (const Error& e) {
      EXPECT_FALSE(fs::exists(d.file("out"))) << "nothing may appear at the output";
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string msg = message("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 5}\n");
  EXPECT_NE(msg.find("bad.jsonl:2"), std::string::npos) << msg;
  msg = message("bad.jsonl.zst", zstd_bytes("{\"text\": \"ok\"}\n{\"text\" \"x\"}\n"));
  EXPECT_NE(msg.find("bad.jsonl.zst:2"), std::string::npos) << msg;
  const std::string zst = zstd_bytes(std::string(5000, 'z') + "\n");
  msg = message("cut.txt.zst", zst.substr(0, zst.size() - 3));
  EXPECT_NE(msg.find("cut.txt.zst"), std::string::npos) << msg;
  msg = message("not.parquet", "PAR1 but not really");
  EXPECT_NE(msg.find(testing::parquet_built() ? "not.parquet is not a readable parquet file"
                                              : "not.parquet: this lmtrain was built without"),
            std::string::npos)
      << msg;
  msg = message("c.jsonl", "{\"body\": \"x\"}\n", "content");
  EXPECT_NE(msg.find("c.jsonl:1: the object has no \"content\" field"), std::string::npos) << msg;
}

TEST(PrepareTest, BadOptionsAreUsageErrors) {
  PrepareCorpus c;
  PrepareOptions opt = c.options();
  opt.val_fraction = 1.0;
  EXPECT_THROW(run_prepare(opt), UsageError);
  opt = c.options();
  opt.vocab_size = 200;
  EXPECT_THROW(run_prepare(opt), UsageError);
  // A single document of a single line cannot be split into train and val at a line boundary.
  write_text(c.dir.file("one.txt"), "just one document");
  opt = c.options();
  opt.inputs = {c.dir.file("one.txt")};
  try {
    run_prepare(opt);
    ADD_FAILURE() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("none has a line boundary"), std::string::npos)
        << e.what();
  }
}

// DIR/book.txt alone into DIR/out, a tenth held out.
PrepareOptions book_options(const TempDir& d) {
  PrepareOptions o;
  o.inputs = {d.file("book.txt")};
  o.output_dir = d.file("out");
  o.vocab_size = 300;
  o.val_fraction = 0.1;
  o.progress = [](const PrepareProgress&) {};
  return o;
}

// A corpus of one document (issue 38, item 25) is too few for the content-hash split: the last
// val_fraction of its bytes, from the start of a line on, is the validation split, and train
// and val together are the document, byte for byte.
TEST(PrepareTest, OneDocumentIsSplitByPositionAtALineBoundary) {
  TempDir d("lmtrain_prepare_one");
  std::string text, tail;
  for (int i = 0; i < 200; ++i) {
    const std::string line = "Line " + std::to_string(i) + " of the only book.\n";
    text += line;
    if (i >= 180) tail += line;  // line 180 starts at byte 4750 of 5289 (end without its \n)
  }
  write_text(d.file("book.txt"), text);
  const auto r = run_prepare(book_options(d));
  EXPECT_EQ(r.num_documents, 1u);
  EXPECT_EQ(r.num_train_documents, 1u);
  EXPECT_EQ(r.num_val_documents, 1u);
  const BpeTokenizer tok = BpeTokenizer::load_hf(r.tokenizer_path);
  const auto train = decode_split(r.train_paths, tok), val = decode_split(r.val_paths, tok);
  ASSERT_EQ(train.size(), 1u);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0], tail);
  EXPECT_EQ(train[0] + val[0], text);
  const auto summary = nlohmann::json::parse(read_text(r.summary_path));
  EXPECT_EQ(summary["bytes"]["val"].get<uint64_t>(), tail.size());
  EXPECT_EQ(summary["documents"]["total"].get<uint64_t>(), 1u);
  EXPECT_EQ(summary["split"].get<std::string>().rfind("by position", 0), 0u) << summary["split"];
}

// A document longer than max_document_bytes is read in pieces, and split by its whole size: the
// pieces before the cut are training text, those after it validation text, so the validation
// split is the document's last tenth (from a line start), not the last tenth of every piece.
TEST(PrepareTest, OneDocumentReadInPiecesIsSplitByItsWholeSize) {
  TempDir d("lmtrain_prepare_pieces");
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "Row " + std::to_string(i * 7919 % 10007) + " here.\n";
  write_text(d.file("book.txt"), text);
  PrepareOptions o = book_options(d);
  o.max_document_bytes = 1024;
  const auto r = run_prepare(o);
  EXPECT_EQ(r.num_documents, 1u);
  const BpeTokenizer tok = BpeTokenizer::load_hf(r.tokenizer_path);
  std::string train, val;
  for (const auto& part : decode_split(r.train_paths, tok)) train += part;
  for (const auto& part : decode_split(r.val_paths, tok)) val += part;
  const size_t target = static_cast<size_t>(std::llround(text.size() * 0.9));
  const size_t cut = text.rfind('\n', target - 1) + 1;
  EXPECT_EQ(val, text.substr(cut));
  EXPECT_EQ(train, text.substr(0, cut));
  EXPECT_GT(r.num_val_documents, 1u);  // the pieces after the cut, each with its own end
}

// An existing output is refused unless overwrite, which moves it aside.
TEST(PrepareTest, ExistingOutputIsRefusedUnlessOverwrite) {
  PrepareCorpus c;
  const PrepareOptions opt = c.options();
  run_prepare(opt);
  try {
    run_prepare(opt);
    FAIL() << "expected a refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("already holds"), std::string::npos) << e.what();
  }
  PrepareOptions over = opt;
  over.overwrite = true;
  run_prepare(over);
  EXPECT_TRUE(fs::exists(c.dir.file("out/previous-1/train_00000.bin")));
  EXPECT_TRUE(fs::exists(c.dir.file("out/train_00000.bin")));
}

}  // namespace
}  // namespace lmtrain::data
