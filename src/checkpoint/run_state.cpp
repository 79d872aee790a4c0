#include "checkpoint/run_state.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_lock.h"
#include "core/fs.h"
#include "core/regular_file.h"

namespace lmtrain::train {
namespace {
// A run state is a few hundred bytes (its reason, an error text, is the longest part).
constexpr uint64_t kMaxRunStateBytes = 1 << 20;
}  // namespace

void write_run_state(const std::string& run_dir, const RunState& s) {
  nlohmann::json j = {{"state", s.state},
                      {"pid", s.pid},
                      {"host", s.host},
                      {"world_size", s.world_size},
                      {"device", s.device},
                      {"precision", s.precision},
                      {"tokens_per_step", s.tokens_per_step},
                      {"started_unix", s.started_unix}};
  if (s.ended_unix > 0) j["ended_unix"] = s.ended_unix;
  if (s.step >= 0) j["step"] = s.step;
  if (s.signal) j["signal"] = s.signal;
  if (!s.reason.empty()) j["reason"] = s.reason;
  core::write_file_atomic(run_dir + "/" + kRunStateFile, j.dump(2) + "\n");
}

std::optional<RunState> read_run_state(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kRunStateFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const auto j = nlohmann::json::parse(core::read_regular_file(path, kMaxRunStateBytes), nullptr,
                                       /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("state") || !j["state"].is_string()) {
    throw Error(path + ": not a run state (a JSON object with a \"state\" string); remove it or " +
                "let the next `lmtrain train` rewrite it");
  }
  RunState s;
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  auto num = [&](const char* key, double fallback) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
  };
  s.state = str("state");
  s.pid = static_cast<int64_t>(num("pid", 0));
  s.host = str("host");
  s.world_size = static_cast<int64_t>(num("world_size", 0));
  s.device = str("device");
  s.precision = str("precision");
  s.tokens_per_step = static_cast<int64_t>(num("tokens_per_step", 0));
  s.started_unix = num("started_unix", 0);
  s.ended_unix = num("ended_unix", 0);
  s.step = static_cast<int64_t>(num("step", -1));
  s.signal = static_cast<int>(num("signal", 0));
  s.reason = str("reason");
  return s;
}

bool run_process_alive(int64_t pid, const std::string& host, bool* other_host) {
  if (other_host) *other_host = false;
  if (!host.empty() && host != core::host_name()) {
    if (other_host) *other_host = true;
    return false;
  }
  if (pid <= 0 || pid > 0x7fffffff) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace lmtrain::train
