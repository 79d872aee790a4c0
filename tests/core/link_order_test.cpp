// The binaries must name libstdc++ as their first shared library (see
// lmtrain_bind_libstdcxx_first in CMakeLists.txt): pip's libtorch exports its own copy of
// std::filesystem, and whichever library comes first in the lookup order gets every binding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

std::string first_needed(const std::string& binary) {
  auto r = run_command("readelf -d " + binary);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex needed(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  return std::regex_search(r.output, m, needed) ? m[1].str() : "";
}

TEST(LinkOrder, LibstdcxxIsTheFirstSharedLibraryOfEveryBinary) {
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  for (const std::string& binary : {lmtrain_binary(), std::string(self)}) {
    EXPECT_EQ(first_needed(binary), "libstdc++.so.6") << binary;
  }
}

}  // namespace
}  // namespace lmtrain::testing
