// Series from a NumPy .npy file (data/temporal/npy_series.h): the header is parsed by hand, so
// any bytes either give series of exactly the declared shape with finite values, or fail with
// an lmtrain::Error (never an overflowing size, a read past the end, a huge allocation).
#include <cmath>
#include <string>

#include "data/temporal/npy_series.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto series = lmtrain::data::temporal::parse_npy_series(bytes, "fuzz.npy", {0, 0});
    size_t values = 0;
    for (const auto& s : series) {
      if (s.values.size() != static_cast<size_t>(s.channels * s.length) ||
          s.valid.size() != s.values.size()) {
        __builtin_trap();
      }
      for (float v : s.values) {
        if (!std::isfinite(v)) __builtin_trap();
      }
      values += s.values.size();
    }
    if (values * 4 > size) __builtin_trap();  // never more values than the bytes could hold
  });
  return 0;
}
