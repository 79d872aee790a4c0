// One entry point for the series a user hands to a command (`lmtrain generate --series FILE`),
// by the file's extension: .csv (csv_series.h: a series per column), .npy (npy_series.h: a
// series per row), .jsonl (temporal_jsonl.h: every series of every line, in order).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/temporal/series_checks.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

// UsageError for a directory, another extension or a missing file; Error (bad data) for what the
// reader refuses (naming the file and the position).
std::vector<SeriesValues> read_series_file(const std::string& path, const ReadOptions& options);
inline std::vector<SeriesValues> read_series_file(const std::string& path, int64_t max_length) {
  return read_series_file(path, ReadOptions{max_length, 0});
}

}  // namespace lmtrain::data::temporal
