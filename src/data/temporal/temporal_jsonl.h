// Samples as JSON lines in ChatTS's training format (issue 26), which public time-series QA
// datasets use and `lmtrain temporal-data` writes:
//   {"input": "... <ts><ts/> ...", "output": "...", "timeseries": [SERIES, ...], ...}
// one SERIES per placeholder, in order. A univariate SERIES is a list of values [v0, v1, ...];
// a multichannel one a list of channels of equal length [[c0 v0, ...], [c1 v0, ...]] (C, L).
// A "timeseries" that is a flat list of values [v0, v1, ...] rather than a list of series is
// read as one univariate series. A missing value is null (masked: value 0, valid 0). Synthetic
// samples add "task", "choices", "answer", "numeric_answer" (a number or null) and "attributes" (an
// object); readers take them when present and leave them empty otherwise.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "data/temporal/series_checks.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

// One line (no newline). Values are written as the shortest text that reads back to the same
// float32 (through a double, as JSON readers do), so a written sample reads back bit for bit.
std::string sample_to_jsonl(const TemporalSample& s);

// How much of a line a reader needs.
enum class JsonlFields {
  kSample,     // input and output (strings) are required: a training / eval sample
  kSeriesOnly  // only the series (a line may have none); input, when present, must match them
};

// One parsed line. Error (bad data, exit 1) "`where`: ..." (where: "FILE:LINE") for a line that is
// not a JSON object, a missing or mistyped field, a placeholder count that differs from the series
// count, a bad value ("timeseries[1] channel 0 value 7: ..."), ragged channels, or a series
// check_series refuses.
TemporalSample sample_from_json(const nlohmann::json& j, const std::string& where,
                                const ReadOptions& options,
                                JsonlFields fields = JsonlFields::kSample);
// The same from the line's text (parsed strictly: core/json_strict.h).
TemporalSample sample_from_jsonl(const std::string& line, const std::string& where,
                                 const ReadOptions& options,
                                 JsonlFields fields = JsonlFields::kSample);

// Every non-blank line of a JSONL file; Error (bad data) for a file without samples.
std::vector<TemporalSample> read_temporal_jsonl(const std::string& path, const ReadOptions& options,
                                                JsonlFields fields = JsonlFields::kSample);
// The same, each with the (1-based) line it came from.
struct NumberedSample {
  int64_t line = 0;
  TemporalSample sample;
};
std::vector<NumberedSample> read_numbered_temporal_jsonl(const std::string& path,
                                                         const ReadOptions& options,
                                                         JsonlFields fields = JsonlFields::kSample);

// How many placeholders (kSeriesPlaceholder) a prompt holds.
int64_t count_placeholders(const std::string& text);

}  // namespace lmtrain::data::temporal
