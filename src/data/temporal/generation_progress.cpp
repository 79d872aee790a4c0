#include "data/temporal/generation_progress.h"

#include <cmath>
#include <cstdio>

namespace lmtrain::data::temporal {

std::string progress_line(const GenerationProgress& p) {
  const double rate = p.seconds > 0 ? static_cast<double>(p.done) / p.seconds : 0.0;
  const double pct =
      p.total > 0 ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 100.0;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%lld/%lld samples (%.0f%%), %.0f samples/s",
                static_cast<long long>(p.done), static_cast<long long>(p.total), std::floor(pct),
                rate);
  std::string out = buf;
  if (p.done < p.total && rate > 0) {
    std::snprintf(buf, sizeof(buf), ", ETA %.0f s",
                  std::ceil(static_cast<double>(p.total - p.done) / rate));
    out += buf;
  }
  return out;
}

}  // namespace lmtrain::data::temporal
