// One sample of time-series question answering / captioning (issue 26): a prompt with one
// placeholder per series, the series themselves, and the answer text the LM is trained to
// produce. The synthetic generator (generator.h), the readers of real data (CSV, NPY, ChatTS
// JSONL) and the cached shards of `lmtrain temporal-data` all produce this; the trainer's
// TemporalData (train/) turns it into token rows with soft-token slots.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace lmtrain::data::temporal {

// Where a series' soft tokens go in a prompt, as ChatTS's training data writes it.
inline constexpr const char* kSeriesPlaceholder = "<ts><ts/>";

// One (possibly multivariate) series: C channels of L values, channel-major.
struct SeriesValues {
  int64_t channels = 1;
  int64_t length = 0;
  std::vector<float> values;   // (C, L): values[c * length + t]
  std::vector<uint8_t> valid;  // (C, L): 1 = a real value, 0 = missing (its value is 0)
};

struct TemporalSample {
  std::string input;                 // the prompt: text with one kSeriesPlaceholder per series
  std::string output;                // the answer / caption text (the only trained tokens)
  std::vector<SeriesValues> series;  // in placeholder order

  // Synthetic samples only (empty / NaN for real data): what the QA eval scores.
  std::string task;                  // the attribute asked about, e.g. "trend" or "caption"
  std::vector<std::string> choices;  // the canonical answer phrases of a class task, else empty
  std::string answer;                // the canonical answer phrase (one of choices, or a number)
  double numeric_answer = std::numeric_limits<double>::quiet_NaN();  // numeric tasks
  std::string attributes_json;  // every attribute the curve was built from, as JSON
};

}  // namespace lmtrain::data::temporal
