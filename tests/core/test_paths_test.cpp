// The paths the tests run lmtrain and python from: CMake's, unless the environment names others
// (scripts/device_prebuilt.sh runs a test binary built here on the GPU machine, where the tree,
// the binary and the python lie elsewhere).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

// Sets `name` to `value` for the scope ("" unsets it), then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value.empty()) {
      unsetenv(name);
    } else {
      setenv(name, value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(TestPaths, AreCMakesUnlessTheEnvironmentNamesOthers) {
  {
    ScopedEnv binary("LMTRAIN_TEST_BINARY", "");
    ScopedEnv source("LMTRAIN_TEST_SOURCE_DIR", "");
    ScopedEnv python("LMTRAIN_TEST_PYTHON", "");
    EXPECT_EQ(lmtrain_binary(), LMTRAIN_BINARY);
    EXPECT_EQ(source_dir(), LMTRAIN_SOURCE_DIR);
    EXPECT_EQ(lmtrain_python(), LMTRAIN_PYTHON);
  }
  ScopedEnv binary("LMTRAIN_TEST_BINARY", "/elsewhere/build/lmtrain");
  ScopedEnv source("LMTRAIN_TEST_SOURCE_DIR", "/elsewhere");
  EXPECT_EQ(lmtrain_binary(), "/elsewhere/build/lmtrain");
  EXPECT_EQ(source_dir(), "/elsewhere");
  // A python that is not there is refused, naming it, wherever its path came from.
  ScopedEnv python("LMTRAIN_TEST_PYTHON", "/elsewhere/no/python");
  try {
    lmtrain_python();
    FAIL() << "a missing python was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/elsewhere/no/python"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::testing
