#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace lmtrain::testing {

TempDir::TempDir(const std::string& prefix) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = fs::temp_directory_path() / (prefix + "_" + std::to_string(rd()));
    if (fs::create_directory(p)) {
      path_ = p.string();
      return;
    }
  }
  throw std::runtime_error("cannot create a temp dir");
}

TempDir::~TempDir() {
  if (std::getenv("LMTRAIN_KEEP_TEST_DIRS")) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The paths CMake compiled in, unless the environment names others: a test binary built on one
// machine and run on another (scripts/device_prebuilt.sh carries lmtrain_cuda_tests to the GPU
// machine, where the tree and the python live elsewhere) is told them there.
static std::string path_or_override(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value && *value ? value : built_in;
}

std::string lmtrain_binary() { return path_or_override("LMTRAIN_TEST_BINARY", LMTRAIN_BINARY); }
std::string source_dir() { return path_or_override("LMTRAIN_TEST_SOURCE_DIR", LMTRAIN_SOURCE_DIR); }

std::string lmtrain_python() {
  const std::string python = path_or_override("LMTRAIN_TEST_PYTHON", LMTRAIN_PYTHON);
  if (python.empty() || !fs::exists(python)) {
    throw std::runtime_error("the tests' python ('" + python +
                             "': LMTRAIN_TEST_PYTHON, else CMake's LMTRAIN_PYTHON) is not there: "
                             "configure the build with the project venv (scripts/setup.sh, then "
                             "scripts/build.sh)");
  }
  return python;
}

std::string torchrun_binary() {
  const std::string python = lmtrain_python();
  return python.substr(0, python.rfind('/') + 1) + "torchrun";
}

CommandResult run_hf_check(const std::string& args) {
  return run_command(lmtrain_python() + " " + source_dir() + "/tests/fixtures/hf_check.py " + args);
}

nlohmann::json check_result(const CommandResult& r) {
  const std::string marker = "@@JSON@@";
  const size_t at = r.output.rfind(marker);
  if (at == std::string::npos) throw std::runtime_error("no JSON result in:\n" + r.output);
  const size_t begin = at + marker.size();
  return nlohmann::json::parse(r.output.substr(begin, r.output.find('\n', begin) - begin));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> checkpoint_steps(const std::string& run_dir) {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(run_dir) / "checkpoints";
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

void expect_refused(const CommandResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const auto& p : parts)
    EXPECT_TRUE(contains(r.output, p)) << "'" << p << "' in\n" << r.output;
}

}  // namespace lmtrain::testing
