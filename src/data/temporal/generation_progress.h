// Progress of a long generation (`lmtrain temporal-data`), reported through a callback so the
// command decides how to show it (cli/cmd_temporal_data.cpp: core::Progress, the display every
// long command uses) without the generator knowing about stderr. The callback runs on the
// calling thread only (never on a worker), after each batch of samples, with `done` rising to
// `total`.
#pragma once
#include <cstdint>
#include <functional>

namespace lmtrain::data::temporal {

struct GenerationProgress {
  int64_t done = 0;    // samples written so far
  int64_t total = 0;   // samples to write
  double seconds = 0;  // since the generation started
};

using ProgressCallback = std::function<void(const GenerationProgress&)>;

}  // namespace lmtrain::data::temporal
