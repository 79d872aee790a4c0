// Series from a CSV file (data/temporal/csv_series.h): any bytes either parse into series whose
// values are finite and whose masks match, or fail with an lmtrain::Error.
#include <cmath>
#include <string>

#include "data/temporal/csv_series.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto c = lmtrain::data::temporal::parse_csv_series(text, "fuzz.csv", {4096, 0});
    if (c.names.size() != c.series.size() || c.series.empty()) __builtin_trap();
    for (const auto& s : c.series) {
      if (s.channels != 1 || s.length < 1 || s.length > 4096) __builtin_trap();
      if (s.values.size() != static_cast<size_t>(s.length) || s.valid.size() != s.values.size()) {
        __builtin_trap();
      }
      for (size_t i = 0; i < s.values.size(); ++i) {
        if (!std::isfinite(s.values[i]) || s.valid[i] > 1 || (!s.valid[i] && s.values[i] != 0)) {
          __builtin_trap();
        }
      }
    }
  });
  return 0;
}
