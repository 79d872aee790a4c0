#include "report/run_report.h"

#include <sys/stat.h>

#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/regular_file.h"
#include "report/html_page.h"
#include "report/markdown_card.h"
#include "report/run_data.h"
#include "report/run_metrics.h"

namespace lmtrain::report {
namespace {

std::string render_runs(const std::vector<RunData>& runs, ReportFormat format) {
  return format == ReportFormat::kHtml ? render_html_report(runs, report_timestamp())
                                       : render_markdown_card(runs, report_timestamp());
}

// What the live report keeps between refreshes of one run dir: the reader of metrics.jsonl,
// fed only with the bytes appended since, and which file it read (an --overwrite moves the
// file aside and a new one starts).
struct LiveMetrics {
  std::unique_ptr<MetricsReader> reader;
  uint64_t dev = 0, ino = 0;
};

struct LiveReports {
  std::mutex mu;
  std::map<std::string, LiveMetrics> by_dir;
  std::set<std::string> warned;
};

LiveReports& live_reports() {
  static LiveReports r;
  return r;
}

RunMetrics read_appended_metrics(LiveMetrics& live, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return RunMetrics{};
  // A regular file within the cap only, as `lmtrain report` reads it (run_metrics.h).
  const core::RegularFile file(path, kMaxMetricsBytes);
  const uint64_t size = file.size();
  if (!live.reader || file.device() != live.dev || file.inode() != live.ino ||
      size < live.reader->bytes_fed()) {
    live.reader = std::make_unique<MetricsReader>(path);
    live.dev = file.device();
    live.ino = file.inode();
  }
  const uint64_t from = live.reader->bytes_fed();
  if (size > from) live.reader->feed(file.read(from, size - from));
  return live.reader->finish();
}

}  // namespace

std::string report_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string render_report(const std::vector<std::string>& run_dirs, ReportFormat format) {
  std::vector<RunData> runs;
  for (const auto& d : run_dirs) runs.push_back(read_run(d));
  name_runs(runs);
  return render_runs(runs, format);
}

void refresh_run_report(const std::string& dir) {
  auto& live = live_reports();
  std::lock_guard<std::mutex> lock(live.mu);
  try {
    LiveMetrics& entry = live.by_dir[dir];
    RunMetrics metrics;
    try {
      metrics = read_appended_metrics(entry, dir + "/metrics.jsonl");
    } catch (...) {
      entry = LiveMetrics{};  // start over next time
      throw;
    }
    std::vector<RunData> runs{read_run(dir, &metrics)};
    name_runs(runs);
    core::write_file_atomic(dir + "/" + kRunReportFile, render_runs(runs, ReportFormat::kHtml));
  } catch (const std::exception& e) {
    if (live.warned.insert(dir).second) {
      log::warn("could not write " + dir + "/" + kRunReportFile + " (training goes on; " +
                "log.report=false turns the report off): " + e.what());
    }
  }
}

}  // namespace lmtrain::report
