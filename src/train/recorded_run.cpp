#include "train/recorded_run.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>

#include "checkpoint/run_state.h"
#include "core/config_choice.h"
#include "core/error.h"
#include "core/file_lock.h"
#include "core/fs.h"
#include "core/log.h"
#include "report/run_report.h"

namespace lmtrain::train {
namespace {

// Recording must never be why a run fails: a write error is a warning.
void record_run_state(const std::string& run_dir, const RunState& state) {
  try {
    write_run_state(run_dir, state);
  } catch (const std::exception& e) {
    log::warn("could not record the run's state in " + run_dir + "/" + kRunStateFile + ": " +
              e.what());
  }
}

// run_state.json as the job before this one left it (nullopt: there was none), so that a start
// refused with a UsageError can put it back: a refusal is no state of the run it refused.
std::optional<std::string> read_previous_run_state(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kRunStateFile;
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    return core::read_file(path);
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable: nothing to put back
  }
}

void restore_run_state(const std::string& run_dir, const std::optional<std::string>& previous) {
  const std::string path = run_dir + "/" + kRunStateFile;
  try {
    if (previous) {
      core::write_file_atomic(path, *previous);
    } else {
      std::filesystem::remove(path);
    }
  } catch (const std::exception& e) {
    log::warn("could not put back " + path + " after the refused start: " + e.what());
  }
}

}  // namespace

TrainResult run_training_recorded(const RunOptions& options, const SetupOptions& setup,
                                  ConfigSnapshot& snapshot, dist::Group& group,
                                  const core::Runtime& rt, const StartedRun& run) {
  const bool is_main = group.rank() == 0;
  const std::string& run_dir = options.run_dir;
  const bool report = options.loop.report;
  RunState state;
  state.state = "running";
  state.pid = ::getpid();
  state.host = core::host_name();
  state.world_size = group.size();
  state.device = rt.device.str();
  state.precision = core::to_string(rt.precision);
  state.tokens_per_step = options.batch.tokens_per_step();
  state.started_unix = unix_now();
  const auto previous = is_main ? read_previous_run_state(run_dir) : std::nullopt;
  if (is_main) record_run_state(run_dir, state);
  TrainResult result;
  try {
    result = run_training(options, setup, snapshot, group, rt, run);
  } catch (const UsageError&) {
    // Refused (exit 2: a resume whose model differs, a bad key): the run dir's state stays what
    // the last job that ran there left.
    if (is_main) restore_run_state(run_dir, previous);
    throw;
  } catch (const std::exception& e) {
    if (is_main) {
      state.state = "failed";
      state.ended_unix = unix_now();
      state.reason = e.what();
      record_run_state(run_dir, state);
      // A run refused before it wrote its config has no page to draw.
      if (report && std::filesystem::exists(run_dir + "/config.yaml")) {
        report::refresh_run_report(run_dir);
      }
    }
    throw;
  }
  if (is_main) {
    state.ended_unix = unix_now();
    state.step = result.steps_done;
    if (result.stop_signal) {
      state.state = "stopped";
      state.signal = result.stop_signal;
      state.reason =
          log::format("signal %d, %s", result.stop_signal, ::strsignal(result.stop_signal));
    } else if (result.stopped_early) {
      state.state = "stopped";
      state.reason = "train.stop_at_step";
    } else {
      state.state = "finished";
    }
    record_run_state(run_dir, state);
    if (report) report::refresh_run_report(run_dir);
  }
  return result;
}

}  // namespace lmtrain::train
