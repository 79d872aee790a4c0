// The binaries must bind std::filesystem to libstdc++, never to the copy pip's libtorch exports
// (see lmtrain_bind_libstdcxx_first in CMakeLists.txt and tools/elf_needed_first.cpp): a mix of
// the two implementations crashed remove_all and filesystem_error on Ubuntu 24.04.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

std::vector<std::string> needed_libraries(const std::string& binary) {
  auto r = run_command("readelf -d " + binary);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> names;
  const std::regex needed(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), needed), end; it != end; ++it)
    names.push_back((*it)[1].str());
  return names;
}

std::string self_binary() {
  char self[4096] = {};
  EXPECT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  return self;
}

TEST(LinkOrder, LibstdcxxIsTheFirstSharedLibraryOfEveryBinary) {
  for (const std::string& binary : {lmtrain_binary(), self_binary()}) {
    const auto names = needed_libraries(binary);
    ASSERT_FALSE(names.empty()) << binary;
    EXPECT_EQ(names.front(), "libstdc++.so.6") << binary;
  }
}

// What the order is for: with every symbol bound at load (LD_BIND_NOW), no std::filesystem
// reference of the binary or of libstdc++ itself resolves into a torch library.
TEST(LinkOrder, NoStdFilesystemSymbolBindsIntoTorch) {
  auto r = run_command("LD_DEBUG=bindings LD_BIND_NOW=1 " + lmtrain_binary() + " --version 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(r.output.size() > 4000 ? r.output.size() - 4000 : 0);
  std::istringstream lines(r.output);
  std::string line;
  int filesystem_bindings = 0;
  while (std::getline(lines, line)) {
    if (line.find("_ZNSt10filesystem") == std::string::npos) continue;
    ++filesystem_bindings;
    EXPECT_EQ(std::regex_search(line, std::regex(R"( to \S*lib(torch|c10)[^ /]*\.so)")), false)
        << line;
  }
  EXPECT_GT(filesystem_bindings, 0)
      << "LD_DEBUG=bindings printed no std::filesystem binding at all";
}

// The post-link tool in both directions on a copy of the binary: it can put another library
// first, and puts libstdc++ back first; the result still runs.
TEST(LinkOrder, ElfNeededFirstReordersAndKeepsTheBinaryWorking) {
  TempDir dir;
  const std::string copy = dir.file("lmtrain_copy");
  std::filesystem::copy_file(lmtrain_binary(), copy);
  const auto original = needed_libraries(copy);
  ASSERT_GE(original.size(), 2u);
  const std::string other = original[1];

  ASSERT_EQ(run_command(std::string(LMTRAIN_ELF_NEEDED_FIRST) + " " + copy + " " + other).exit_code,
            0);
  auto moved = needed_libraries(copy);
  EXPECT_EQ(moved.front(), other);
  EXPECT_EQ(moved.size(), original.size());

  ASSERT_EQ(
      run_command(std::string(LMTRAIN_ELF_NEEDED_FIRST) + " " + copy + " libstdc++.so.6").exit_code,
      0);
  EXPECT_EQ(needed_libraries(copy), original);
  EXPECT_EQ(run_command(copy + " --version").exit_code, 0);

  auto missing =
      run_command(std::string(LMTRAIN_ELF_NEEDED_FIRST) + " " + copy + " libnot-there.so 2>&1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("does not link libnot-there.so"), std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace lmtrain::testing
