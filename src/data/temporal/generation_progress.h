// Progress of a long generation (`lmtrain temporal-data`), reported through a callback so the
// command decides how to show it: today a throttled progress line (progress_line), later a
// progress bar, without touching the generator. The callback runs on the calling thread only
// (never on a worker), after each batch of samples, with `done` rising to `total`.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace lmtrain::data::temporal {

struct GenerationProgress {
  int64_t done = 0;    // samples written so far
  int64_t total = 0;   // samples to write
  double seconds = 0;  // since the generation started
};

using ProgressCallback = std::function<void(const GenerationProgress&)>;

// "40000/100000 samples (40%), 12345 samples/s, ETA 5 s"
std::string progress_line(const GenerationProgress& p);

}  // namespace lmtrain::data::temporal
