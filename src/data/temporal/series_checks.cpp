#include "data/temporal/series_checks.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace lmtrain::data::temporal {

void check_series(const SeriesValues& s, const std::string& where, const ReadOptions& options) {
  if (s.length <= 0 || s.channels <= 0) throw Error(where + ": the series is empty");
  bool any_valid = false;
  for (uint8_t v : s.valid) any_valid = any_valid || v != 0;
  if (!any_valid) throw Error(where + ": the series has no value (every one is missing)");
  if (options.max_length > 0 && s.length > options.max_length) {
    // Data that fits a differently set model: the key to change is named (a usage error, 2).
    throw UsageError(where + ": the series has " + std::to_string(s.length) +
                     " values, more than the maximum length " + std::to_string(options.max_length) +
                     " (model.temporal.max_length): cut it or raise the maximum");
  }
  if (options.channels > 0 && s.channels != options.channels) {
    throw UsageError(where + ": the series has " + std::to_string(s.channels) +
                     " channel(s), the model takes " + std::to_string(options.channels) +
                     " (model.temporal.channels)");
  }
}

float checked_series_value(double v, const std::string& where) {
  if (std::isnan(v)) {
    throw Error(where +
                ": NaN is not a value (write a missing value as missing: an empty "
                "CSV cell, null in JSON)");
  }
  if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
    throw Error(where + ": " +
                (std::isfinite(v) ? "a value beyond float32's range" : "an infinite value") +
                " (series values must be finite float32 numbers)");
  }
  return static_cast<float>(v);
}

}  // namespace lmtrain::data::temporal
