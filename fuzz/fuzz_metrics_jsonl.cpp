// A run's metrics.jsonl as `lmtrain report` reads it (report/run_metrics.h): fed whole, and fed
// in two pieces split at an arbitrary byte (the trainer's live report reads what was appended
// since its last refresh), which must give the same series.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "report/run_metrics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto whole = lmtrain::report::parse_metrics(text, "metrics.jsonl");
    lmtrain::report::MetricsReader pieces("metrics.jsonl");
    const size_t cut = size ? data[0] % (size + 1) : 0;
    pieces.feed(text.substr(0, cut));
    pieces.feed(text.substr(cut));
    const auto split = pieces.finish();
    if (split.records != whole.records || split.scalars.size() != whole.scalars.size()) {
      __builtin_trap();
    }
    for (const auto& [name, s] : whole.scalars) {
      for (size_t i = 1; i < s.size(); ++i) {
        if (!(s.step[i - 1] <= s.step[i])) __builtin_trap();  // series stay in step order
      }
    }
  });
  return 0;
}
