// RUN_DIR/run_state.json: what the last training job on a run dir did, so that a reader
// (`lmtrain report`) can tell a finished run from a stopped or a crashed one without guessing
// from the log. Rank 0 writes it atomically (core::write_file_atomic):
//   "running"   when training starts (after the run dir is claimed), with its pid and host;
//   "finished"  when the run reached train.max_steps (or was already complete);
//   "stopped"   when it stopped early with a checkpoint: SIGINT/SIGTERM or train.stop_at_step;
//   "failed"    when it ended with an error (the error's text is kept); a start refused with a
//               UsageError (exit 2: a resume whose model differs, say) is no end of the run it
//               refused: the file is put back as the job before it left it.
// A job killed outright (kill -9, out of memory, a lost node) cannot write anything: it leaves
// "running" with a pid that is no longer alive, which run_status() calls crashed.
// Beside the state it records what the report's summary needs and no other file holds: the
// world size, the device, the precision and the tokens of one optimizer step.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace lmtrain::train {

inline constexpr const char* kRunStateFile = "run_state.json";

struct RunState {
  std::string state;  // running | finished | stopped | failed
  int64_t pid = 0;
  std::string host;
  int64_t world_size = 0;
  std::string device;           // "cpu", "cuda:0"
  std::string precision;        // train.precision
  int64_t tokens_per_step = 0;  // global tokens of one optimizer step (0: unknown)
  double started_unix = 0;      // seconds since the epoch
  double ended_unix = 0;        // 0 while running
  int64_t step = -1;            // optimizer steps done when it ended (-1: unknown)
  int signal = 0;               // the signal that stopped it
  std::string reason;           // why it stopped or failed: "signal 15", the error text, ...
};

// Writes RUN_DIR/run_state.json atomically. Throws lmtrain::Error naming the file.
void write_run_state(const std::string& run_dir, const RunState& state);

// nullopt when RUN_DIR/run_state.json does not exist; throws lmtrain::Error naming the file when
// it exists but is not a run state.
std::optional<RunState> read_run_state(const std::string& run_dir);

// True when `pid` is a live process on this machine and `host` is this machine's name (an empty
// host means this machine). A pid on another host cannot be checked: false, and `other_host` is
// set.
bool run_process_alive(int64_t pid, const std::string& host, bool* other_host = nullptr);

// "now" as seconds since the epoch.
double unix_now();

}  // namespace lmtrain::train
