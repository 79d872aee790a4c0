// PythonRandom against CPython's random module (the venv's python): shuffles and samples of
// both of sample()'s methods (a pool for small populations, a set of picks for large ones), and
// seeds wider than 32 bits.
#include "eval/python_random.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lmtrain::eval {
namespace {

TEST(PythonRandom, EqualsCPython) {
  const std::string script =
      "import json, random\n"
      "out = []\n"
      "for seed, n, k in [(1337, 10, 0), (1234, 5, 3), (1239, 100, 5), (99, 30, 10), "
      "(2**40 + 7, 1000, 25), (0, 2, 1)]:\n"
      "    x = list(range(n)); random.Random(seed).shuffle(x)\n"
      "    s = random.Random(seed).sample(list(range(n)), k)\n"
      "    out.append({'shuffle': x, 'sample': s})\n"
      "print('@@JSON@@' + json.dumps(out))\n";
  lmtrain::testing::TempDir dir("python_random");
  lmtrain::testing::write_text(dir.file("r.py"), script);
  const auto r =
      lmtrain::testing::run_command(lmtrain::testing::lmtrain_python() + " " + dir.file("r.py"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto want = lmtrain::testing::check_result(r);
  const std::vector<std::tuple<uint64_t, int64_t, int64_t>> cases = {
      {1337, 10, 0},
      {1234, 5, 3},
      {1239, 100, 5},
      {99, 30, 10},
      {(uint64_t{1} << 40) + 7, 1000, 25},
      {0, 2, 1}};
  ASSERT_EQ(want.size(), cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto [seed, n, k] = cases[c];
    EXPECT_EQ(PythonRandom(seed).shuffle_order(n), want[c]["shuffle"].get<std::vector<int64_t>>())
        << "seed " << seed;
    std::vector<int64_t> pop(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pop[static_cast<size_t>(i)] = i;
    EXPECT_EQ(PythonRandom(seed).sample(pop, k), want[c]["sample"].get<std::vector<int64_t>>())
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace lmtrain::eval
