#include "checkpoint/run_files.h"

#include "checkpoint/run_state.h"

namespace lmtrain::train {
namespace {

bool run_file_starts(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool run_file_ends(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_run_file(const std::string& name) {
  // An atomic write's temporary (core::write_file_atomic) left by a killed run.
  if (const auto tmp = name.find(".tmp."); tmp != std::string::npos && tmp > 0) {
    return is_run_file(name.substr(0, tmp));
  }
  // report.html is report/run_report.h's kRunReportFile (report/ is a layer above).
  for (const char* exact : {"config.yaml", "train.log", "metrics.jsonl", kRunStateFile,
                            "report.html", "checkpoints", kTeacherRunDir}) {
    if (name == exact) return true;
  }
  return (run_file_starts(name, "train.rank") && run_file_ends(name, ".log")) ||
         run_file_starts(name, "events.out.tfevents.");
}

std::vector<std::string> foreign_files(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (!is_run_file(n)) out.push_back(n);
  }
  return out;
}

}  // namespace lmtrain::train
