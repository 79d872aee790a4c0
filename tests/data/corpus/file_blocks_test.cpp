#include "data/corpus/file_blocks.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/corpus/input_files.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using testing::TempDir;
using testing::write_text;

std::vector<std::string> documents_of(std::unique_ptr<DocumentReader> reader) {
  std::vector<std::string> docs;
  std::string text;
  while (reader->next(&text)) docs.push_back(text);
  return docs;
}

// The documents of `file` read block by block, for every block size from 1 byte to past the
// file's size: always the whole file's documents, each once, in order.
void expect_blocks_hold_every_document_once(const InputFile& file,
                                            const DocumentReaderOptions& options) {
  const auto whole = documents_of(open_document_reader(file, options));
  ASSERT_FALSE(whole.empty());
  for (uint64_t block = 1; block <= file.size + 1; ++block) {
    std::vector<std::string> joined;
    for (uint64_t b = 0; b < file.size; b += block) {
      for (auto& d :
           documents_of(open_block_reader(file, b, std::min(b + block, file.size), options))) {
        joined.push_back(std::move(d));
      }
    }
    ASSERT_EQ(joined, whole) << file.path << " in blocks of " << block << " bytes";
  }
}

TEST(FileBlocks, JsonlBlocksHoldEveryLineOnce) {
  TempDir dir("lmtrain_blocks");
  std::string text;
  for (int i = 0; i < 23; ++i) {
    text += nlohmann::json{{"text", "line " + std::to_string(i) + std::string(i % 5, 'x')}}.dump();
    text += i % 7 == 3 ? "\r\n" : "\n";
    if (i % 9 == 4) text += "\n";  // a blank line
  }
  text += nlohmann::json{{"text", "no newline at the end"}}.dump();
  write_text(dir.file("a.jsonl"), text);
  const auto file = list_input_files({dir.file("a.jsonl")}).at(0);
  ASSERT_TRUE(splits_into_blocks(file, {}));
  ASSERT_EQ(file.size, text.size());
  expect_blocks_hold_every_document_once(file, {});
}

TEST(FileBlocks, SeparatedTextBlocksHoldEveryDocumentOnce) {
  TempDir dir("lmtrain_blocks");
  // A separator first, two in a row, one with '\r', a line that only starts like one, a
  // document of one character and one spread over lines, no trailing separator.
  const std::string text =
      "%\nfirst doc\nsecond line\n%\n%\nb\n%\r\n%%not a separator\nmore\n%\nlast one\nends";
  write_text(dir.file("t.txt"), text);
  auto file = list_input_files({dir.file("t.txt")}).at(0);
  DocumentReaderOptions options;
  options.doc_separator = "%";
  ASSERT_TRUE(splits_into_blocks(file, options));
  expect_blocks_hold_every_document_once(file, options);
  // A longer separator, and documents of the synthetic corpus's shape.
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "Doc " + std::to_string(i) + " says hi.\n<|sep|>\n";
  write_text(dir.file("c.txt"), corpus);
  options.doc_separator = "<|sep|>";
  expect_blocks_hold_every_document_once(list_input_files({dir.file("c.txt")}).at(0), options);
}

TEST(FileBlocks, WhatCannotBeEnteredMidwayIsNotSplit) {
  TempDir dir("lmtrain_blocks");
  write_text(dir.file("t.txt"), "one document\nof two lines\n");
  write_text(dir.file("a.jsonl.gz"), "");
  EXPECT_FALSE(splits_into_blocks(classify_input(dir.file("t.txt")), {}));  // no separator
  DocumentReaderOptions sep;
  sep.doc_separator = "%";
  EXPECT_FALSE(splits_into_blocks(classify_input(dir.file("a.jsonl.gz")), sep));
  EXPECT_THROW(open_block_reader(classify_input(dir.file("t.txt")), 0, 4, {}), Error);
}

}  // namespace
}  // namespace lmtrain::data
