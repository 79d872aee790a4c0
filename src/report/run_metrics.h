// Reading a run's metrics.jsonl (observe/metrics_logger.h writes it) into series, generically:
// the report draws whatever a run logged, so a metric added later gets its chart without a
// change here.
//  - every number of a record is a scalar series against the record's "step": top-level keys
//    as they are ("loss", "val_loss", "lr"), nested objects flattened with '/' ("qa": {"acc": x}
//    -> "qa/acc"); booleans and strings are not metrics;
//  - an array of objects that carry an integer "layer" (the MoE statistics, "moe": [{"layer",
//    "load_cv", ...}]) becomes per-layer series, one map per field ("moe/load_cv" -> layer ->
//    series), for heat maps;
//  - a resumed run logs steps again that the killed session had already logged: a record whose
//    step goes back (below the highest step seen, or onto the last step of its own series)
//    starts a new session, and every point at or after that step is dropped, so each series
//    stays in step order and shows the session that produced the checkpointed weights;
//  - "elapsed_s" restarts at 0 in every session: the training time is the sum of each
//    session's last value.
// Bad lines: the last line of a killed run may be cut off, so a last line that is not valid
// JSON is skipped with a note; any other bad line is an error naming FILE:LINE.
// This file uses no libtorch (fuzz/fuzz_metrics_jsonl.cpp fuzzes it).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::report {

// Points (step, value) in increasing step order.
struct Series {
  std::vector<double> step;
  std::vector<double> value;
  size_t size() const { return step.size(); }
  bool empty() const { return step.empty(); }
};

struct RunMetrics {
  std::map<std::string, Series> scalars;
  std::map<std::string, std::map<int64_t, Series>> per_layer;
  std::vector<std::string> notes;  // what was skipped, for the report to show
  double train_seconds = 0;        // sum over sessions of the last elapsed_s
  int sessions = 0;                // sessions seen (resumes + 1); 0 with no record
  int64_t records = 0;             // valid lines read
};

// Builds RunMetrics line by line, so the trainer's report can read only what was appended
// since its last refresh (report/run_report.h keeps one per run dir).
class MetricsReader {
 public:
  explicit MetricsReader(std::string path) : path_(std::move(path)) {}

  // Adds the complete lines of `text` (which continues what earlier calls were given) and keeps
  // an unterminated tail for the next call. Throws lmtrain::Error "PATH:LINE: ..." for a line
  // that is not a JSON object with an integer "step", unless it is the file's last line, which
  // finish() judges.
  void feed(std::string_view text);
  // The metrics as of now: a pending unterminated tail that parses counts; one that does not is
  // skipped with a note (a run killed while writing it). Callable any number of times; on a
  // reader about to be dropped (std::move(reader).finish()) it moves the series out instead
  // of copying them.
  RunMetrics finish() const&;
  RunMetrics finish() &&;
  // Bytes fed so far (the offset to read on from).
  uint64_t bytes_fed() const { return bytes_fed_; }
  // How many records the whole file will hold, about: each new series reserves that much.
  void expect_records(size_t n) { expected_records_ = n; }

 private:
  // One record: checks it and adds its values. Throws naming `line_no`.
  void add_line(std::string_view line, int64_t line_no, RunMetrics& into, double& last_elapsed,
                double& max_step) const;
  // finish()'s work on `m`, a copy of the series or the series themselves.
  void finish_into(RunMetrics& m) const;

  std::string path_;
  std::string tail_;      // bytes after the last newline
  std::string bad_line_;  // a complete line that failed to parse; fatal unless it is the last
  int64_t bad_line_no_ = 0;
  std::string bad_what_;
  int64_t lines_ = 0;
  uint64_t bytes_fed_ = 0;
  RunMetrics metrics_;
  double last_elapsed_ = -1;
  double max_step_ = -1;
  size_t expected_records_ = 0;
};

// The most of metrics.jsonl the report reads: a million logged steps take ~100 MB, so this is
// room for about ten million, and a file beyond it is refused instead of filling memory.
inline constexpr uint64_t kMaxMetricsBytes = uint64_t{1} << 30;

// The whole file, read in pieces, when it is a regular file of at most max_bytes (a FIFO, a
// device, a directory or a larger file is refused: core/regular_file.h). Throws lmtrain::Error
// naming `path` when it cannot be read.
RunMetrics read_metrics_file(const std::string& path, uint64_t max_bytes = kMaxMetricsBytes);
// The same from text (tests, the fuzz target); `path` names it in messages.
RunMetrics parse_metrics(std::string_view text, const std::string& path);

}  // namespace lmtrain::report
