// Everything the report shows of one run dir (docs/architecture.md, "The run directory"),
// read without libtorch tensors and without taking the run's lock, so it works on a run that is
// training (the trainer itself refreshes RUN_DIR/report.html), finished, stopped or crashed.
//  - metrics.jsonl (report/run_metrics.h), config.yaml (flattened to "section.key" -> text),
//    the complete checkpoints and the latest/best links, run_state.json
//    (checkpoint/run_state.h);
//  - the state: finished / stopped / crashed / running, from run_state.json, else from the end
//    of train.log and the lock's pid (runs written before run_state.json existed);
//  - the model's description and parameter count from its config, the world size, device,
//    precision and tokens per step from run_state.json (else the latest checkpoint's meta.json
//    and the config).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/run_metrics.h"

namespace lmtrain::report {

enum class RunStatus { kFinished, kStopped, kCrashed, kRunning, kUnknown };
const char* run_status_name(RunStatus s);  // "finished", "stopped", ...

struct CheckpointSummary {
  std::string name;  // "step_00000200"
  int64_t step = 0;
  bool latest = false, best = false;
  std::optional<double> val_loss;
};

struct RunData {
  std::string dir;   // as given
  std::string name;  // the label in legends and tables (unique among a report's runs)
  std::map<std::string, std::string> config;  // "optim.lr" -> "0.0006" (config.yaml's text)
  RunMetrics metrics;
  RunStatus status = RunStatus::kUnknown;
  std::string status_detail;  // "at step 200 of 200", "pid 123 is gone (killed?)", ...
  std::vector<CheckpointSummary> checkpoints;
  std::string model;       // GptConfig::describe(), or "?"
  int64_t parameters = 0;  // 0: unknown
  int64_t world_size = 0;  // 0: unknown
  std::string device, precision;
  int64_t tokens_per_step = 0;     // 0: unknown (no tokens axis then)
  int64_t max_steps = 0;           // the schedule's horizon when the config says (0: unknown)
  std::vector<std::string> notes;  // said on the page: skipped lines, missing files
};

// Reads `dir`. Throws UsageError naming it when it does not exist, is not a directory or is not
// a run dir (neither metrics.jsonl nor config.yaml in it; a checkpoint dir is named as one), and
// lmtrain::Error naming the file when metrics.jsonl cannot be read or is damaged (report/
// run_metrics.h). `metrics`, when given, is used instead of reading metrics.jsonl (the trainer's
// incremental reader).
RunData read_run(const std::string& dir, const RunMetrics* metrics = nullptr);

// Gives each run a unique name: its directory's name, or more of its path where two runs share
// one ("a/run" and "b/run").
void name_runs(std::vector<RunData>& runs);

// config.yaml's text as flat "section.key" -> value (nested maps joined with '.', lists as
// "[a, b]"). Throws lmtrain::Error naming `path` when it is not YAML.
std::map<std::string, std::string> flatten_config_yaml(const std::string& text,
                                                       const std::string& path);

}  // namespace lmtrain::report
