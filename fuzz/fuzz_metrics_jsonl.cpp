// A run's metrics.jsonl as `lmtrain report` reads it (report/run_metrics.h): fed whole, and fed
// in two pieces split at an arbitrary byte (the trainer's live report reads what was appended
// since its last refresh), which must give the same series. Then read from a file, as the report
// does, through its file-type checks (core/regular_file.h): the input's last byte puts the text
// at metrics.jsonl as a regular file (under and over a size cap), or puts a FIFO, a symlink to
// /dev/zero or a directory there instead. Those must be refused with an lmtrain::Error (a hang
// is a finding: libFuzzer's -timeout), and a regular file within the cap must read back the same
// series as the text.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_util.h"
#include "report/run_metrics.h"

namespace {

bool same_metrics(const lmtrain::report::RunMetrics& a, const lmtrain::report::RunMetrics& b) {
  return a.records == b.records && a.scalars.size() == b.scalars.size();
}

// The file-type checks: what is at `path` is chosen by `kind`; only a regular file within the
// cap may be read, anything else must throw lmtrain::Error.
void read_as_file(const uint8_t* data, size_t size, uint8_t kind) {
  namespace fs = std::filesystem;
  const std::string path = lmtrain::fuzz::write_input(data, size, ".metrics.jsonl");
  const std::string odd = path + ".odd";
  std::error_code ec;
  fs::remove_all(odd, ec);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bool must_refuse = true;
  std::string target = odd;
  uint64_t cap = lmtrain::report::kMaxMetricsBytes;
  switch (kind % 5) {
    case 0:  // a regular file within the cap
      target = path;
      must_refuse = false;
      break;
    case 1:  // a regular file over a cap just below its size
      if (size == 0) return;
      target = path;
      cap = size - 1;
      break;
    case 2:
      if (::mkfifo(odd.c_str(), 0600) != 0) std::abort();
      break;
    case 3:
      fs::create_symlink("/dev/zero", odd);
      break;
    default:
      fs::create_directory(odd);
      break;
  }
  bool refused = false;
  try {
    const auto read = lmtrain::report::read_metrics_file(target, cap);
    if (!same_metrics(read, lmtrain::report::parse_metrics(text, target))) __builtin_trap();
  } catch (const lmtrain::Error&) {
    refused = true;
  }
  // A regular file within the cap fails only where its text does.
  if (must_refuse && !refused) __builtin_trap();
  fs::remove_all(odd, ec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto whole = lmtrain::report::parse_metrics(text, "metrics.jsonl");
    lmtrain::report::MetricsReader pieces("metrics.jsonl");
    const size_t cut = size ? data[0] % (size + 1) : 0;
    pieces.feed(text.substr(0, cut));
    pieces.feed(text.substr(cut));
    const auto split = pieces.finish();
    if (!same_metrics(split, whole)) __builtin_trap();
    for (const auto& [name, s] : whole.scalars) {
      for (size_t i = 1; i < s.size(); ++i) {
        if (!(s.step[i - 1] <= s.step[i])) __builtin_trap();  // series stay in step order
      }
    }
  });
  lmtrain::fuzz::expect_only_lmtrain_errors(
      [&] { read_as_file(data, size, size ? data[size - 1] : 0); });
  return 0;
}
