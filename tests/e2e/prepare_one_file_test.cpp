// One text file of one document streams through `lmtrain prepare` in bounded memory (issue 38,
// item 25): its peak resident set does not grow with the document's size. The 400 MB check of
// the issue takes minutes on 2 cores, so it is a script (bench/prepare_one_file.sh); here two
// sizes, 6x apart, with the read pieces and the tokenizer sample held small.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

// A book of `bytes` bytes: numbered lines of varied words, one document (no separator).
std::string write_book(const std::string& path, size_t bytes) {
  static const char* words[] = {"river", "stone",  "lantern", "harbour", "quiet",  "morning",
                                "ember", "winter", "signal",  "meadow",  "copper", "thread"};
  std::ofstream out(path, std::ios::binary);
  size_t written = 0;
  for (uint64_t i = 0; written < bytes; ++i) {
    std::string line = "Line " + std::to_string(i);
    for (int w = 0; w < 8; ++w) line += std::string(" ") + words[(i * 7 + w * 5 + i / 13) % 12];
    line += ".\n";
    out << line;
    written += line.size();
  }
  return path;
}

struct Peak {
  int exit_code = -1;
  int64_t max_rss_mib = 0;
  std::string output;
};

// Runs `args` (argv words) under the venv's python, which reads the child's peak RSS back from
// getrusage(RUSAGE_CHILDREN): the child is its only one.
Peak run_measured(const TempDir& dir, const std::string& args) {
  const std::string script = dir.file("peak_rss.py");
  write_text(script,
             "import json, resource, subprocess, sys\n"
             "rc = subprocess.call(sys.argv[1:])\n"
             "kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
             "print('@@JSON@@' + json.dumps({'rc': rc, 'max_rss_kib': kib}))\n");
  const auto r = run_command(lmtrain_python() + " " + script + " " + args);
  Peak p;
  p.output = r.output;
  const auto j = check_result(r);
  p.exit_code = j["rc"].get<int>();
  p.max_rss_mib = j["max_rss_kib"].get<int64_t>() / 1024;
  return p;
}

TEST(PrepareOneFile, PeakMemoryDoesNotGrowWithTheDocumentsSize) {
  TempDir dir("lmtrain_prepare_one_file");
  Peak peak[2];
  const size_t mib[2] = {8, 48};
  for (int k = 0; k < 2; ++k) {
    const std::string name = "book" + std::to_string(mib[k]);
    const std::string book = write_book(dir.file(name + ".txt"), mib[k] << 20);
    peak[k] = run_measured(dir, lmtrain_binary() + " prepare --input " + book + " --output " +
                                    dir.file(name) +
                                    " --vocab_size 300 --threads 2 --max_document_bytes 1048576"
                                    " --tokenizer_train_bytes 2000000 --progress_seconds 0");
    ASSERT_EQ(peak[k].exit_code, 0) << peak[k].output;
    EXPECT_TRUE(contains(peak[k].output, "splitting by position instead")) << peak[k].output;
    const auto summary = nlohmann::json::parse(read_text(dir.file(name) + "/prepare.json"));
    EXPECT_EQ(summary["bytes"]["total"].get<uint64_t>(), std::filesystem::file_size(book));
    EXPECT_EQ(summary["documents"]["total"].get<uint64_t>(), 1u);
  }
  std::cout << "prepare's peak RSS: " << peak[0].max_rss_mib << " MiB at " << mib[0] << " MiB, "
            << peak[1].max_rss_mib << " MiB at " << mib[1] << " MiB\n";
  EXPECT_LT(peak[1].max_rss_mib, peak[0].max_rss_mib + 24)
      << "6x the text must not need more memory";
}

}  // namespace
}  // namespace lmtrain::testing
