// `tokenize --documents` writes one line of ids per document, and line N is document N: an empty
// document keeps its (empty) line instead of being dropped (issue 38, item 4).
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class TokenizeDocuments : public ::testing::Test {
 protected:
  // The ids of `text` encoded alone, as one line without its newline.
  std::string ids_of(const std::string& text) {
    write_text(dir_.file("one.txt"), text);
    auto r = run_command(lmtrain_binary() + " tokenize" + tok_ + " --input " +
                         dir_.file("one.txt") + " --output " + dir_.file("one.ids"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string ids = read_text(dir_.file("one.ids"));
    return ids.substr(0, ids.find('\n'));
  }
  std::vector<std::string> documents(const std::string& file, const std::string& flags = "") {
    auto r = run_command(lmtrain_binary() + " tokenize" + tok_ + " --documents --input " + file +
                         flags + " --output " + dir_.file("docs.ids"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return lines_of(read_text(dir_.file("docs.ids")));
  }
  TempDir dir_{"lmtrain_tok_docs"};
  std::string tok_ = " --tokenizer " + source_dir() + "/tests/fixtures/tokenizer/tokenizer.json";
};

TEST_F(TokenizeDocuments, EmptyJsonlDocumentsKeepTheirLine) {
  write_text(dir_.file("docs.jsonl"),
             "{\"text\": \"first one\"}\n{\"text\": \"\"}\n{\"text\": null}\n"
             "{\"text\": \"  \"}\n\n{\"text\": \"last\"}\n");
  const auto lines = documents(dir_.file("docs.jsonl"));
  ASSERT_EQ(lines.size(), 5u);  // five records; the blank line of the file is none
  EXPECT_EQ(lines[0], ids_of("first one"));
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(lines[3], ids_of("  "));
  EXPECT_EQ(lines[4], ids_of("last"));
}

TEST_F(TokenizeDocuments, EmptyTextDocumentsBetweenSeparatorsKeepTheirLine) {
  write_text(dir_.file("docs.txt"), "one\n%\n%\ntwo\n%\n");
  const auto lines = documents(dir_.file("docs.txt"), " --doc_separator %");
  ASSERT_EQ(lines.size(), 3u);  // nothing follows the last separator: no fourth document
  EXPECT_EQ(lines[0], ids_of("one\n"));
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], ids_of("two\n"));
}

}  // namespace
}  // namespace lmtrain::testing
