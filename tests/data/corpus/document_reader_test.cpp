#include "data/corpus/document_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/corpus/corpus_reader.h"
#include "data/corpus/corpus_test_util.h"
#include "data/corpus/input_files.h"
#include "data/corpus/line_reader.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using testing::gzip_bytes;
using testing::TempDir;
using testing::write_parquet;
using testing::write_text;
using testing::zstd_bytes;

std::vector<std::string> read_all_documents(const std::string& path,
                                            DocumentReaderOptions opt = {}) {
  InputFile f = classify_input(path);
  auto reader = open_document_reader(f, opt);
  std::vector<std::string> docs;
  std::string text;
  while (reader->next(&text)) docs.push_back(text);
  EXPECT_EQ(reader->documents(), docs.size());
  return docs;
}

std::string reader_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Documents with what breaks naive readers: escapes, UTF-8, embedded newlines, quotes.
std::vector<std::string> reader_sample_documents(int n) {
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    docs.push_back("Document " + std::to_string(i) + " says \"caf\xC3\xA9\" and\nmore text " +
                   std::string(static_cast<size_t>(i % 7) * 11, 'x') + " \xF0\x9F\x99\x82 end");
  }
  return docs;
}

std::string docs_as_jsonl(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json{{"id", 1}, {"text", d}}.dump() + "\n";
  return out;
}

TEST(InputFiles, ClassifiesByName) {
  EXPECT_EQ(classify_input("a/b.txt").format, InputFormat::kText);
  EXPECT_EQ(classify_input("a/b.jsonl").format, InputFormat::kJsonl);
  EXPECT_EQ(classify_input("a/b.ndjson").format, InputFormat::kJsonl);
  const auto gz = classify_input("a/b.jsonl.gz");
  EXPECT_EQ(gz.format, InputFormat::kJsonl);
  EXPECT_EQ(gz.compression, Compression::kGzip);
  const auto zst = classify_input("a/B.TXT.ZST");
  EXPECT_EQ(zst.format, InputFormat::kText);
  EXPECT_EQ(zst.compression, Compression::kZstd);
  EXPECT_EQ(describe_format(zst), "text.zst");
  EXPECT_EQ(classify_input("x/train-00000-of-00002.parquet").format, InputFormat::kParquet);
  EXPECT_THROW(classify_input("x/a.parquet.gz"), UsageError);
}

TEST(InputFiles, DirectoriesAreSortedAndRecursive) {
  TempDir dir("lmtrain_inputs");
  std::filesystem::create_directories(dir.file("in/b"));
  write_text(dir.file("in/b/z.txt"), "z");
  write_text(dir.file("in/a.jsonl"), "{}");
  write_text(dir.file("in/c.txt"), "c");
  const auto files = list_input_files({dir.file("in"), dir.file("in/c.txt")});
  ASSERT_EQ(files.size(), 3u);  // c.txt named twice is listed once
  EXPECT_EQ(files[0].path, dir.file("in/a.jsonl"));
  EXPECT_EQ(files[1].path, dir.file("in/b/z.txt"));
  EXPECT_EQ(files[2].path, dir.file("in/c.txt"));
  EXPECT_EQ(files[2].size, 1u);
  EXPECT_THROW(list_input_files({dir.file("nope")}), UsageError);
}

// The same documents as JSONL, JSONL.gz, JSONL.zst, text with separators (and its .gz / .zst)
// and parquet (several row groups, written by pyarrow) read back identically.
TEST(DocumentReader, EveryFormatGivesTheSameDocuments) {
  TempDir dir("lmtrain_docs");
  const auto docs = reader_sample_documents(50);
  const std::string jsonl = docs_as_jsonl(docs);
  write_text(dir.file("d.jsonl"), jsonl);
  write_text(dir.file("d.jsonl.gz"), gzip_bytes(jsonl));
  write_text(dir.file("d.jsonl.zst"), zstd_bytes(jsonl));
  std::string text;
  for (const auto& d : docs) text += d + "\n%\n";
  write_text(dir.file("d.txt"), text);
  write_text(dir.file("d.txt.gz"), gzip_bytes(text));
  write_text(dir.file("d.txt.zst"), zstd_bytes(text));
  std::vector<std::optional<std::string>> rows(docs.begin(), docs.end());
  EXPECT_EQ(write_parquet(dir.file("d.parquet"), rows, 8), 7);  // ceil(50 / 8) row groups

  for (const char* name : {"d.jsonl", "d.jsonl.gz", "d.jsonl.zst", "d.parquet"}) {
    EXPECT_EQ(read_all_documents(dir.file(name)), docs) << name;
  }
  DocumentReaderOptions sep;
  sep.doc_separator = "%";
  std::vector<std::string> with_newline;
  for (const auto& d : docs) with_newline.push_back(d + "\n");  // text keeps the line's '\n'
  for (const char* name : {"d.txt", "d.txt.gz", "d.txt.zst"}) {
    EXPECT_EQ(read_all_documents(dir.file(name), sep), with_newline) << name;
  }
  // Tiny read buffers: every line spans many reads, the compressed streams many refills.
  DocumentReaderOptions small;
  small.read_buffer_bytes = 7;
  for (const char* name : {"d.jsonl", "d.jsonl.gz", "d.jsonl.zst"}) {
    EXPECT_EQ(read_all_documents(dir.file(name), small), docs) << name;
  }
}

TEST(DocumentReader, TextWholeFileBlankSkippedAndCrLfSeparators) {
  TempDir dir("lmtrain_docs");
  write_text(dir.file("one.txt"), "line one\nline two\n");
  EXPECT_EQ(read_all_documents(dir.file("one.txt")),
            std::vector<std::string>{"line one\nline two\n"});
  write_text(dir.file("sep.txt"), "a\r\n%\r\n \n%\r\n%\nb");
  DocumentReaderOptions sep;
  sep.doc_separator = "%";
  EXPECT_EQ(read_all_documents(dir.file("sep.txt"), sep), (std::vector<std::string>{"a\r\n", "b"}));
  write_text(dir.file("blank.jsonl"),
             "\n{\"text\": \"  \"}\n{\"text\": null}\n{\"text\": \"x\"}\n");
  EXPECT_EQ(read_all_documents(dir.file("blank.jsonl")), std::vector<std::string>{"x"});
}

// Several gzip members / zstd frames one after the other (cat a.gz b.gz) are one stream.
TEST(DocumentReader, ConcatenatedMembersAndFrames) {
  TempDir dir("lmtrain_docs");
  const std::string a = docs_as_jsonl({"first"}), b = docs_as_jsonl({"second", "third"});
  write_text(dir.file("m.jsonl.gz"), gzip_bytes(a) + gzip_bytes(b));
  write_text(dir.file("m.jsonl.zst"), zstd_bytes(a) + zstd_bytes(b));
  const std::vector<std::string> want{"first", "second", "third"};
  EXPECT_EQ(read_all_documents(dir.file("m.jsonl.gz")), want);
  EXPECT_EQ(read_all_documents(dir.file("m.jsonl.zst")), want);
}

TEST(DocumentReader, TextColumnNamesTheJsonField) {
  TempDir dir("lmtrain_docs");
  write_text(dir.file("c.jsonl"), "{\"content\": \"hello\", \"text\": 3}\n");
  DocumentReaderOptions opt;
  opt.text_column = "content";
  EXPECT_EQ(read_all_documents(dir.file("c.jsonl"), opt), std::vector<std::string>{"hello"});
}

TEST(DocumentReader, BadJsonlIsNamedWithItsLine) {
  TempDir dir("lmtrain_docs");
  write_text(dir.file("bad.jsonl.zst"), zstd_bytes("{\"text\": \"ok\"}\n\n{\"text\": \"ok\"\n"));
  std::string msg = reader_error_of([&] { read_all_documents(dir.file("bad.jsonl.zst")); });
  EXPECT_NE(msg.find("bad.jsonl.zst:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;

  write_text(dir.file("missing.jsonl"), "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n");
  msg = reader_error_of([&] { read_all_documents(dir.file("missing.jsonl")); });
  EXPECT_NE(msg.find("missing.jsonl:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no \"text\" field"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--text_column"), std::string::npos) << msg;

  write_text(dir.file("number.jsonl"), "{\"text\": 5}\n");
  msg = reader_error_of([&] { read_all_documents(dir.file("number.jsonl")); });
  EXPECT_NE(msg.find("number.jsonl:1: field \"text\" is a number, not a string"), std::string::npos)
      << msg;

  write_text(dir.file("array.jsonl"), "[1, 2]\n");
  msg = reader_error_of([&] { read_all_documents(dir.file("array.jsonl")); });
  EXPECT_NE(msg.find("array.jsonl:1: expected a JSON object"), std::string::npos) << msg;
}

TEST(DocumentReader, TruncatedAndCorruptCompressedFilesAreNamed) {
  TempDir dir("lmtrain_docs");
  const std::string jsonl = docs_as_jsonl(reader_sample_documents(200));
  const std::string zst = zstd_bytes(jsonl), gz = gzip_bytes(jsonl);
  write_text(dir.file("cut.jsonl.zst"), zst.substr(0, zst.size() / 2));
  write_text(dir.file("cut.jsonl.gz"), gz.substr(0, gz.size() / 2));
  write_text(dir.file("tail.jsonl.zst"), zst.substr(0, zst.size() - 1));  // only the checksum cut
  std::string msg = reader_error_of([&] { read_all_documents(dir.file("cut.jsonl.zst")); });
  EXPECT_NE(msg.find("cut.jsonl.zst"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  msg = reader_error_of([&] { read_all_documents(dir.file("cut.jsonl.gz")); });
  EXPECT_NE(msg.find("cut.jsonl.gz is truncated"), std::string::npos) << msg;
  msg = reader_error_of([&] { read_all_documents(dir.file("tail.jsonl.zst")); });
  EXPECT_NE(msg.find("tail.jsonl.zst"), std::string::npos) << msg;

  std::string garbled = gz;
  for (size_t i = 20; i < 60; ++i) garbled[i] = static_cast<char>(garbled[i] ^ 0x5A);
  write_text(dir.file("garbled.jsonl.gz"), garbled);
  msg = reader_error_of([&] { read_all_documents(dir.file("garbled.jsonl.gz")); });
  EXPECT_NE(msg.find("garbled.jsonl.gz"), std::string::npos) << msg;
  write_text(dir.file("plain.txt.zst"), "this is not zstd at all");
  msg = reader_error_of([&] { read_all_documents(dir.file("plain.txt.zst")); });
  EXPECT_NE(msg.find("plain.txt.zst is not valid zstd data"), std::string::npos) << msg;
  write_text(dir.file("empty.txt.gz"), "");
  msg = reader_error_of([&] { read_all_documents(dir.file("empty.txt.gz")); });
  EXPECT_NE(msg.find("empty.txt.gz is empty"), std::string::npos) << msg;
}

// The memory bound: a reader holds its read buffer, the decompressor's input buffer and at most
// one line of max_document_bytes, however large the file.
TEST(DocumentReader, HoldsOneBufferWhateverTheFileSize) {
  TempDir dir("lmtrain_docs");
  const auto docs = reader_sample_documents(4000);  // ~500 KB of JSONL
  const std::string jsonl = docs_as_jsonl(docs);
  write_text(dir.file("big.jsonl.zst"), zstd_bytes(jsonl));
  write_text(dir.file("big.jsonl.gz"), gzip_bytes(jsonl));
  DocumentReaderOptions opt;
  opt.read_buffer_bytes = 4096;
  opt.max_document_bytes = 4096;
  for (const char* name : {"big.jsonl.zst", "big.jsonl.gz"}) {
    auto reader = open_document_reader(classify_input(dir.file(name)), opt);
    std::string text;
    size_t n = 0;
    while (reader->next(&text)) ++n;
    EXPECT_EQ(n, docs.size());
    EXPECT_GT(reader->peak_buffer_bytes(), 0u);
    EXPECT_LE(reader->peak_buffer_bytes(), 3 * 4096u) << name;
    EXPECT_LT(reader->peak_buffer_bytes() * 40, jsonl.size()) << name;
  }
  // A JSON line longer than max_document_bytes is an error naming it, not a bigger buffer.
  write_text(
      dir.file("long.jsonl"),
      docs_as_jsonl({"short"}) + docs_as_jsonl({std::string(10000, 'y')}) + docs_as_jsonl({"x"}));
  const std::string msg = reader_error_of([&] { read_all_documents(dir.file("long.jsonl"), opt); });
  EXPECT_NE(msg.find("long.jsonl:2: a JSON line longer than 4096 bytes"), std::string::npos) << msg;
}

// A text document longer than max_document_bytes is cut at line boundaries; a line longer than
// that at a UTF-8 character boundary. Nothing is lost.
TEST(DocumentReader, LongTextDocumentsAreCut) {
  TempDir dir("lmtrain_docs");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + " \xC3\xA9\xC3\xA9\n";
  text += std::string(3000, 'a') + "\xE2\x82\xAC" + std::string(3000, 'b') + "\n";
  write_text(dir.file("long.txt"), text);
  DocumentReaderOptions opt;
  opt.max_document_bytes = 1024;
  const auto docs = read_all_documents(dir.file("long.txt"), opt);
  ASSERT_GT(docs.size(), 5u);
  std::string joined;
  for (const auto& d : docs) {
    EXPECT_LE(d.size(), 1024u);
    const auto last = static_cast<unsigned char>(d.back());
    EXPECT_FALSE(last >= 0xC0) << "a piece ends inside a UTF-8 character";
    joined += d;
  }
  EXPECT_EQ(joined, text);
}

TEST(DocumentReader, BinaryTextFilesAreDetected) {
  TempDir dir("lmtrain_docs");
  write_text(dir.file("a.dat"), std::string("\x01\x02\0\0index", 9));
  write_text(dir.file("a.txt.gz"), gzip_bytes(std::string("x\0y", 3)));
  write_text(dir.file("b.txt"), "plain");
  EXPECT_TRUE(is_binary_text_file(classify_input(dir.file("a.dat"))));
  EXPECT_TRUE(is_binary_text_file(classify_input(dir.file("a.txt.gz"))));
  EXPECT_FALSE(is_binary_text_file(classify_input(dir.file("b.txt"))));
}

// Resuming at a position reads on from the same document.
TEST(CorpusReader, ResumesAtAPosition) {
  TempDir dir("lmtrain_docs");
  write_text(dir.file("a.jsonl"), docs_as_jsonl({"a0", "a1", "a2"}));
  write_text(dir.file("b.jsonl.gz"), gzip_bytes(docs_as_jsonl({"b0", "b1"})));
  const auto files = list_input_files({dir.file("a.jsonl"), dir.file("b.jsonl.gz")});
  auto all = [&](CorpusPosition start) {
    CorpusReader r(files, {}, start);
    std::vector<std::string> out;
    std::string t;
    while (!r.at_end()) {
      if (r.next_in_file(&t)) out.push_back(t);
    }
    EXPECT_EQ(r.bytes_done(), r.bytes_total());
    return out;
  };
  EXPECT_EQ(all({}), (std::vector<std::string>{"a0", "a1", "a2", "b0", "b1"}));
  EXPECT_EQ(all({0, 2}), (std::vector<std::string>{"a2", "b0", "b1"}));
  EXPECT_EQ(all({0, 3}), (std::vector<std::string>{"b0", "b1"}));
  EXPECT_EQ(all({1, 1}), (std::vector<std::string>{"b1"}));
  EXPECT_EQ(all({2, 0}), std::vector<std::string>{});
  EXPECT_THROW(all({1, 5}), Error);

  // Chunks stay inside one file and carry their positions.
  CorpusReader r(files, {});
  DocumentChunk c;
  std::vector<std::pair<uint64_t, size_t>> seen;
  while (next_chunk(r, 4, &c)) seen.push_back({c.start.file, c.documents.size()});
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, size_t>>{{0, 2}, {0, 1}, {1, 2}}));
}

}  // namespace
}  // namespace lmtrain::data
