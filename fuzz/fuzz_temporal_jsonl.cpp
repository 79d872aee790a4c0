// Time-series samples in ChatTS's JSONL format (data/temporal/temporal_jsonl.h): any file either
// reads into samples or fails with an lmtrain::Error; a sample read is written back and read
// again to the same text and the same float bits.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "data/temporal/temporal_jsonl.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace t = lmtrain::data::temporal;
  const std::string path = lmtrain::fuzz::write_input(data, size, ".jsonl");
  for (const auto fields : {t::JsonlFields::kSample, t::JsonlFields::kSeriesOnly}) {
    lmtrain::fuzz::expect_only_lmtrain_errors([&] {
      for (const auto& s : t::read_temporal_jsonl(path, {4096, 0}, fields)) {
        const std::string line = t::sample_to_jsonl(s);
        const auto back = t::sample_from_jsonl(line, "round trip", {4096, 0}, fields);
        const bool same_numeric = std::isnan(back.numeric_answer)
                                      ? std::isnan(s.numeric_answer)
                                      : back.numeric_answer == s.numeric_answer;
        if (back.input != s.input || back.output != s.output ||
            back.series.size() != s.series.size() || back.task != s.task ||
            back.choices != s.choices || back.answer != s.answer || !same_numeric ||
            back.attributes_json != s.attributes_json || t::sample_to_jsonl(back) != line) {
          std::fprintf(stderr, "FINDING: the sample differs after a write and read: %s\n",
                       line.substr(0, 300).c_str());
          __builtin_trap();
        }
        for (size_t k = 0; k < s.series.size(); ++k) {
          const auto &a = s.series[k], &b = back.series[k];
          if (a.channels != b.channels || a.length != b.length || a.valid != b.valid ||
              std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "FINDING: series %zu differs after a write and read\n", k);
            __builtin_trap();
          }
        }
      }
    });
  }
  return 0;
}
