// The checks every reader of real series applies (issue 26), so a bad file fails at load time
// with its name and the position, never as a NaN loss later: values must be finite float32
// numbers (a missing value is masked, never NaN), a series must hold at least one valid value,
// be no longer than the configured maximum and have the configured number of channels.
#pragma once
#include <cstdint>
#include <string>

#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

struct ReadOptions {
  int64_t max_length = 0;  // a longer series is an error (e.g. model.temporal.max_length); 0: any
  int64_t channels = 0;    // every series must have this many channels; 0: any
};

// Error (bad data, exit 1) "`where`: ..." for a series with no values or no valid value;
// UsageError (2, naming the key) for one longer than options.max_length or with another channel
// count than options.channels: data a differently set model would take.
void check_series(const SeriesValues& s, const std::string& where, const ReadOptions& options);

// `v` as a float32 value; Error "`where`: ..." when it is NaN, infinite or beyond float32's
// range (a missing value must be written as missing: an empty CSV cell, JSON null).
float checked_series_value(double v, const std::string& where);

}  // namespace lmtrain::data::temporal
