// Helpers shared by the tests: scratch directories and running the lmtrain binary.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lmtrain::testing {

// A fresh, empty directory under the system temp dir, removed when the object dies
// (unless LMTRAIN_KEEP_TEST_DIRS is set).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "lmtrain_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

// Runs `command` through /bin/sh, capturing stdout+stderr.
CommandResult run_command(const std::string& command);

// Path of the built lmtrain binary and of the source tree (CMake's, or LMTRAIN_TEST_BINARY and
// LMTRAIN_TEST_SOURCE_DIR where set).
std::string lmtrain_binary();
std::string source_dir();

// The project venv's python (LMTRAIN_PYTHON, set by CMake, or LMTRAIN_TEST_PYTHON; a hard
// requirement of the tests), and a run of tests/fixtures/hf_check.py ARGS with it. check_result()
// is the JSON object the script printed last (after its "@@JSON@@" marker); it throws when there is
// none.
std::string lmtrain_python();
// torchrun beside that python (the venv's torch 2.11, scripts/setup.sh).
std::string torchrun_binary();
CommandResult run_hf_check(const std::string& args);
nlohmann::json check_result(const CommandResult& r);

// Whole file as a string; throws if unreadable.
std::string read_text(const std::string& path);
// The step_* checkpoint directories of a run dir, sorted (none when it has no checkpoints/).
std::vector<std::string> checkpoint_steps(const std::string& run_dir);
// A refusal: exit code 2 (a usage error) and every one of `parts` in the output.
void expect_refused(const CommandResult& r, const std::vector<std::string>& parts);
// `part` occurs in `text`.
bool contains(const std::string& text, const std::string& part);
void write_text(const std::string& path, const std::string& text);

}  // namespace lmtrain::testing
