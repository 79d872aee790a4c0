// Shared by the libFuzzer targets: the input as a file (the readers under test open paths), and
// the rule that a reader may only fail with lmtrain::Error: any other exception (a
// nlohmann::json type_error, std::out_of_range, a YAML conversion error...) reaches the user as
// a cryptic message or an exit code 1 where 2 was due, so it counts as a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"

namespace lmtrain::fuzz {

// A per-process scratch file holding the current input.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    return std::string(t && *t ? t : "/tmp");
  }();
  const std::string path = dir + "/lmtrain_fuzz_" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// Runs fn; lmtrain::Error (the readers' documented failure) is fine, anything else aborts.
template <typename Fn>
void expect_only_lmtrain_errors(Fn&& fn) {
  try {
    fn();
  } catch (const lmtrain::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: exception that is not an lmtrain::Error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace lmtrain::fuzz
