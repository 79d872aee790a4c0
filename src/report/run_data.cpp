#include "report/run_data.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/run_state.h"
#include "core/config.h"
#include "core/error.h"
#include "core/file_lock.h"
#include "core/fs.h"
#include "core/lock_probe.h"
#include "core/log.h"
#include "core/regular_file.h"
#include "core/run_dir_lock.h"
#include "model/gpt_config.h"
#include "options/read_model.h"

namespace fs = std::filesystem;

namespace lmtrain::report {
namespace {

// A resolved config is a few KiB; anything this large at config.yaml is not one.
constexpr uint64_t kMaxConfigBytes = 16 << 20;

void flatten_yaml_node(const YAML::Node& node, const std::string& prefix,
                       std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten_yaml_node(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsSequence()) {
    std::string s = "[";
    for (size_t i = 0; i < node.size(); ++i) {
      if (i) s += ", ";
      s += node[i].IsScalar() ? node[i].Scalar() : YAML::Dump(node[i]);
    }
    out[prefix] = s + "]";
  } else if (node.IsScalar()) {
    out[prefix] = node.Scalar();
  } else if (node.IsNull()) {
    out[prefix] = "";
  }
}

// The end of a file (its last `max_bytes`), for the last lines of a long train.log; "" when it
// is absent or no regular file (a FIFO there must not hang the report).
std::string read_file_tail(const std::string& path, size_t max_bytes) {
  try {
    const core::RegularFile file(path, UINT64_MAX);
    const uint64_t size = file.size();
    const uint64_t from = size > max_bytes ? size - max_bytes : 0;
    return file.read(from, size - from);
  } catch (const Error&) {
    return "";
  }
}

std::string last_logged_step_text(const RunMetrics& m) {
  const auto it = m.scalars.find("loss");
  if (it == m.scalars.end() || it->second.empty()) return "";
  return log::format("; last logged step %lld", (long long)it->second.step.back());
}

// A live pid is this run only while the run dir's lock is held: a run that died without a word
// (kill -9) leaves its pid free for the system to give another process, but the kernel dropped
// its lock. True when the lock is known to be free.
bool run_lock_free(const std::string& run_dir) {
  return core::flock_held(run_dir + "/" + core::kRunDirLockFile) == std::optional<bool>(false);
}

// The state of a run from run_state.json, else from train.log and the lock (older runs).
void classify_run(RunData& run, const std::optional<train::RunState>& state) {
  const std::string last = last_logged_step_text(run.metrics);
  if (state) {
    const std::string& s = state->state;
    const std::string at =
        state->step >= 0
            ? log::format("at step %lld%s", (long long)state->step,
                          run.max_steps > 0
                              ? log::format(" of %lld", (long long)run.max_steps).c_str()
                              : "")
            : "";
    if (s == "finished") {
      run.status = RunStatus::kFinished;
      run.status_detail = at;
    } else if (s == "stopped") {
      run.status = RunStatus::kStopped;
      run.status_detail = at + (state->reason.empty() ? "" : " (" + state->reason + ")");
    } else if (s == "failed") {
      run.status = RunStatus::kCrashed;
      run.status_detail = "error: " + state->reason + last;
    } else if (s == "running") {
      bool other_host = false;
      const bool alive = train::run_process_alive(state->pid, state->host, &other_host);
      if (alive && !run_lock_free(run.dir)) {
        run.status = RunStatus::kRunning;
        run.status_detail =
            log::format("pid %lld on %s", (long long)state->pid, state->host.c_str()) + last;
      } else if (other_host) {
        run.status = RunStatus::kUnknown;
        run.status_detail = log::format(
                                "running as pid %lld on host %s when last seen (cannot "
                                "check from this host)",
                                (long long)state->pid, state->host.c_str()) +
                            last;
      } else if (alive) {
        run.status = RunStatus::kCrashed;
        run.status_detail =
            log::format(
                "pid %lld ended without recording an end (killed?); that pid now belongs to "
                "another process (the run dir's lock is free)",
                (long long)state->pid) +
            last;
      } else {
        run.status = RunStatus::kCrashed;
        run.status_detail = log::format("pid %lld ended without recording an end (killed?)",
                                        (long long)state->pid) +
                            last;
      }
    } else {
      run.status = RunStatus::kUnknown;
      run.status_detail = "run_state.json says '" + s + "'";
    }
    return;
  }
  // No run_state.json: a run written before it existed. Its log's last lines tell.
  const std::string log_tail = read_file_tail(run.dir + "/train.log", 65536);
  const auto done = log_tail.rfind(" done: ");
  const auto by_signal = log_tail.rfind("stopped by signal");
  const auto at_step = log_tail.rfind("stopping at train.stop_at_step");
  const auto stopped = by_signal == std::string::npos ? at_step
                       : at_step == std::string::npos ? by_signal
                                                      : std::max(by_signal, at_step);
  const auto started = log_tail.rfind("lmtrain train: rank 0");
  auto after_start = [&](size_t pos) {
    return pos != std::string::npos && (started == std::string::npos || pos > started);
  };
  const std::string owner = core::FileLock::read_owner(run.dir + "/" + core::kRunDirLockFile);
  long long pid = 0;
  char host[256] = {0};
  const bool has_owner = std::sscanf(owner.c_str(), "pid %lld on host %255s", &pid, host) == 2;
  if (after_start(done)) {
    run.status = RunStatus::kFinished;
  } else if (after_start(stopped)) {
    run.status = RunStatus::kStopped;
  } else if (has_owner && train::run_process_alive(pid, host) && !run_lock_free(run.dir)) {
    run.status = RunStatus::kRunning;
    run.status_detail = log::format("pid %lld", pid) + last;
  } else if (!log_tail.empty()) {
    run.status = RunStatus::kCrashed;
    run.status_detail = "train.log has no end line" + last;
  }
  run.notes.push_back(run.dir +
                      ": no run_state.json (written by lmtrain train since the report "
                      "exists); the state is read from train.log");
}

}  // namespace

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kFinished:
      return "finished";
    case RunStatus::kStopped:
      return "stopped";
    case RunStatus::kCrashed:
      return "crashed";
    case RunStatus::kRunning:
      return "running";
    case RunStatus::kUnknown:
      break;
  }
  return "unknown";
}

std::map<std::string, std::string> flatten_config_yaml(const std::string& text,
                                                       const std::string& path) {
  std::map<std::string, std::string> out;
  try {
    flatten_yaml_node(YAML::Load(text), "", out);
  } catch (const YAML::Exception& e) {
    throw Error(path + ": not valid YAML (" + e.what() + ")");
  }
  return out;
}

RunData read_run(const std::string& dir, const RunMetrics* metrics) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw UsageError("run dir " + dir + " does not exist");
  if (!fs::is_directory(dir, ec)) {
    throw UsageError(dir + " is not a directory: give a run dir (the run.dir of `lmtrain train`)");
  }
  RunData run;
  run.dir = dir;
  while (run.dir.size() > 1 && run.dir.back() == '/') run.dir.pop_back();
  const std::string metrics_path = run.dir + "/metrics.jsonl";
  const std::string config_path = run.dir + "/config.yaml";
  const bool has_metrics = fs::exists(metrics_path, ec), has_config = fs::exists(config_path, ec);
  if (!has_metrics && !has_config) {
    if (fs::exists(run.dir + "/meta.json", ec)) {
      throw UsageError(run.dir + " is a checkpoint, not a run dir: give the run dir that holds " +
                       "its checkpoints/ (" +
                       fs::path(run.dir).parent_path().parent_path().string() + ")");
    }
    throw UsageError(run.dir + " is not a run dir: it holds neither metrics.jsonl nor " +
                     "config.yaml (`lmtrain train` writes both into its run.dir)");
  }

  if (has_config) {
    const std::string text = core::read_regular_file(config_path, kMaxConfigBytes);
    run.config = flatten_config_yaml(text, config_path);
    try {
      core::Config cfg = core::Config::defaults();
      cfg.merge_yaml_text(text, config_path);
      const auto mcfg = options::read_gpt_config(cfg, 0);
      run.model = mcfg.describe();
      run.parameters = mcfg.num_params();
      if (cfg.get_int("lora.rank") > 0) {
        run.model += log::format(
            "; LoRA rank %lld on %s (frozen base %s)", (long long)cfg.get_int("lora.rank"),
            cfg.get_string("lora.targets").c_str(), cfg.get_string("model.init_from").c_str());
      }
      run.max_steps = cfg.get_int("train.max_steps");
      run.precision = cfg.get_string("train.precision");
      const int64_t total = cfg.get_int("train.total_batch_size");
      if (total > 0) run.tokens_per_step = total;
    } catch (const Error& e) {
      run.notes.push_back(config_path + ": the model could not be described (" + e.what() + ")");
    }
  } else {
    run.notes.push_back(run.dir + ": no config.yaml (the run has not started its first step)");
  }

  if (metrics) {
    run.metrics = *metrics;
  } else if (has_metrics) {
    run.metrics = read_metrics_file(metrics_path);
  } else {
    run.notes.push_back(run.dir + ": no metrics.jsonl yet");
  }
  for (const auto& n : run.metrics.notes) run.notes.push_back(n);

  // Checkpoints, complete ones only (a step dir with meta.json), and where the links point.
  const std::string ckpt_dir = run.dir + "/checkpoints";
  std::string latest, best;
  if (auto t = train::ckpt_detail::link_target(ckpt_dir + "/latest")) {
    latest = train::ckpt_detail::base_name(*t);
  }
  if (auto t = train::ckpt_detail::link_target(ckpt_dir + "/best")) {
    best = train::ckpt_detail::base_name(*t);
  }
  nlohmann::json latest_meta;
  if (fs::is_directory(ckpt_dir, ec)) {
    for (const auto& e : train::CheckpointStore::list(ckpt_dir)) {
      CheckpointSummary c;
      c.name = train::ckpt_detail::base_name(e.dir);
      c.step = e.step;
      c.latest = c.name == latest;
      c.best = c.name == best;
      const auto meta = nlohmann::json::parse(read_file_tail(e.dir + "/meta.json", 1 << 22),
                                              nullptr, /*allow_exceptions=*/false);
      if (meta.is_object()) {
        if (meta.contains("val_loss") && meta["val_loss"].is_number()) {
          c.val_loss = meta["val_loss"].get<double>();
        }
        if (c.latest || latest_meta.is_null()) latest_meta = meta;
      }
      run.checkpoints.push_back(c);
    }
  }

  // State, and what only the job knew (world size, device, tokens per step).
  std::optional<train::RunState> state;
  try {
    state = train::read_run_state(run.dir);
  } catch (const Error& e) {
    run.notes.push_back(e.what());
  }
  if (state) {
    run.world_size = state->world_size;
    run.device = state->device;
    if (!state->precision.empty()) run.precision = state->precision;
    if (state->tokens_per_step > 0) run.tokens_per_step = state->tokens_per_step;
  }
  if (run.world_size == 0 && latest_meta.is_object() && latest_meta.contains("world_size") &&
      latest_meta["world_size"].is_number_integer()) {
    run.world_size = latest_meta["world_size"].get<int64_t>();
  }
  if (run.tokens_per_step == 0 && run.world_size > 0 && !run.config.empty()) {
    // total_batch_size = 0: micro-batch x seq_len x ranks x accumulation (train/batch_plan.h).
    try {
      const int64_t micro = std::stoll(run.config.at("train.micro_batch_size"));
      const int64_t seq = std::stoll(run.config.at("data.seq_len"));
      const int64_t accum =
          std::max<int64_t>(1, std::stoll(run.config.at("train.grad_accum_steps")));
      run.tokens_per_step = micro * seq * run.world_size * accum;
    } catch (const std::exception&) {
      // Keys missing (an older config): no tokens axis.
    }
  }
  classify_run(run, state);
  if (run.tokens_per_step == 0 && !run.metrics.scalars.empty()) {
    run.notes.push_back(run.dir +
                        ": tokens per step unknown (no run_state.json or checkpoint "
                        "with the world size): no charts against tokens");
  }
  return run;
}

void name_runs(std::vector<RunData>& runs) {
  // Start from each dir's last component; while two names collide, take one more component.
  std::vector<std::vector<std::string>> parts(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& p : fs::path(runs[i].dir)) {
      const std::string s = p.string();
      if (!s.empty() && s != "/" && s != ".") parts[i].push_back(s);
    }
    if (parts[i].empty()) parts[i].push_back(runs[i].dir);
  }
  std::vector<size_t> depth(runs.size(), 1);
  auto name_of = [&](size_t i) {
    const auto& p = parts[i];
    const size_t d = std::min(depth[i], p.size());
    std::string s;
    for (size_t k = p.size() - d; k < p.size(); ++k) s += (s.empty() ? "" : "/") + p[k];
    return s;
  };
  for (int round = 0; round < 64; ++round) {
    bool changed = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      for (size_t j = i + 1; j < runs.size(); ++j) {
        if (name_of(i) != name_of(j)) continue;
        if (depth[i] < parts[i].size()) ++depth[i], changed = true;
        if (depth[j] < parts[j].size()) ++depth[j], changed = true;
      }
    }
    if (!changed) break;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].name = name_of(i);
    // The same dir given twice: number them.
    for (size_t j = 0; j < i; ++j) {
      if (runs[j].name == runs[i].name) runs[i].name += " (" + std::to_string(i + 1) + ")";
    }
  }
}

}  // namespace lmtrain::report
