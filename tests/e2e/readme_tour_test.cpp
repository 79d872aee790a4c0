// The README's tour, run verbatim: every command of the ```sh block under "## Tour", in order,
// through /bin/sh in a scratch directory where build/lmtrain is this build's binary and
// configs/ the source tree's presets, on the demo corpus (Debian's fortunes, which
// scripts/setup.sh installs). The README is parsed when the test runs, so a tour that drifts
// from what lmtrain does fails here; the tour keeps its step counts small enough for CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// The logical commands of the README's tour: the ```sh block after "## Tour", comment lines
// dropped, lines ending in a backslash joined to the next (what sh does with them).
std::vector<std::string> tour_commands(const std::string& readme) {
  const size_t tour = readme.find("\n## Tour\n");
  if (tour == std::string::npos) throw std::runtime_error("README.md has no '## Tour' section");
  const size_t begin = readme.find("```sh\n", tour);
  const size_t end = readme.find("\n```", begin + 5);
  if (begin == std::string::npos || end == std::string::npos) {
    throw std::runtime_error("README.md's tour has no ```sh block");
  }
  std::istringstream in(readme.substr(begin + 6, end - begin - 6));
  std::vector<std::string> commands;
  std::string line, pending;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    if (pending.empty() && (first == std::string::npos || line[first] == '#')) continue;
    pending += line;
    if (!pending.empty() && pending.back() == '\\') {
      pending.back() = ' ';
      continue;
    }
    commands.push_back(pending);
    pending.clear();
  }
  if (!pending.empty()) commands.push_back(pending);
  return commands;
}

nlohmann::json tour_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

TEST(ReadmeTour, TourCommandsParseFromTheReadme) {
  const std::string readme =
      "x\n## Tour\n\n```sh\n# 1. a comment\nbuild/lmtrain a --b \\\n    --c 1\n\n"
      "build/lmtrain d   # trailing comment\n```\nafter\n";
  const auto c = tour_commands(readme);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "build/lmtrain a --b      --c 1");
  EXPECT_EQ(c[1], "build/lmtrain d   # trailing comment");
  EXPECT_THROW(tour_commands("no tour here"), std::runtime_error);
}

TEST(ReadmeTour, EveryTourCommandRunsVerbatimOnTheDemoCorpus) {
  ASSERT_TRUE(fs::is_directory("/usr/share/games/fortunes"))
      << "the tour's corpus /usr/share/games/fortunes is missing: scripts/setup.sh installs "
         "Debian's fortunes package";
  const auto commands = tour_commands(read_text(source_dir() + "/README.md"));
  ASSERT_GE(commands.size(), 10u);
  TempDir tmp("lmtrain_readme_tour");
  fs::create_directories(tmp.file("build"));
  fs::create_symlink(lmtrain_binary(), tmp.file("build/lmtrain"));
  fs::create_directory_symlink(source_dir() + "/configs", tmp.file("configs"));

  const auto start = std::chrono::steady_clock::now();
  for (const auto& command : commands) {
    SCOPED_TRACE(command);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_command("cd " + tmp.path() + " && " + command);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[" << std::fixed << std::setprecision(1) << s << " s] " << command << "\n";
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "README tour: " << commands.size() << " commands in " << total << " s\n";

  // Step 1 prepares every fortune file (the corpus of the README's figures), not just one.
  const auto prep = tour_json(tmp.file("data/fortunes/prepare.json"));
  EXPECT_GT(prep["files"].get<int64_t>(), 10) << prep.dump();
  // Step 7: the MoE preset exports as Mixtral; the import's config fine-tunes into
  // RUN-finetune and leaves the import's one checkpoint as it was.
  EXPECT_EQ(tour_json(tmp.file("hf/moe/config.json"))["model_type"], "mixtral");
  EXPECT_EQ(checkpoint_steps(tmp.file("runs/tiny-hf")).size(), 1u);
  EXPECT_FALSE(checkpoint_steps(tmp.file("runs/tiny-hf-finetune")).empty());
  EXPECT_TRUE(fs::exists(tmp.file("runs/lora-merged/checkpoints/latest/meta.json")));
  // Step 9: the comparison page, beside each run's own page kept by its trainer.
  EXPECT_TRUE(fs::exists(tmp.file("runs/compare.html")));
  EXPECT_TRUE(fs::exists(tmp.file("runs/tiny/report.html")));
}

}  // namespace
}  // namespace lmtrain::testing
