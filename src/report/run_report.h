// `lmtrain report` and the trainer's live report: read run dirs, render HTML or Markdown, write
// the file atomically (a temporary beside it, then a rename), so a browser refreshing the page
// while training rewrites it never sees half a file.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::report {

enum class ReportFormat { kHtml, kMarkdown };

// The report of `run_dirs` (report/run_data.h: errors name the dir or file at fault).
std::string render_report(const std::vector<std::string>& run_dirs, ReportFormat format);

// "2026-01-02 13:04:05", local time.
std::string report_timestamp();

inline constexpr const char* kRunReportFile = "report.html";

// Rewrites RUN_DIR/report.html (RUN_DIR = run.dir). With log.report = true, rank 0 of a training
// job calls it after every evaluation, and `lmtrain train` once more when the run has ended (so
// the page shows the final state and checkpoints). It reads only the part of metrics.jsonl
// written since its previous call (one incremental reader per run dir, kept in this process).
// Never throws: a failure is logged as a warning (once per run dir) and training goes on.
void refresh_run_report(const std::string& run_dir);

}  // namespace lmtrain::report
