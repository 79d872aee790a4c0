#include "core/log.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

namespace lmtrain::log {
namespace {

struct LoggerState {
  std::mutex mu;
  std::ofstream file;
  std::string prefix;
  bool quiet = false;
  bool progress_quiet = false;
  std::string status;  // the in-place status line on the terminal ("" = none shown)
  // A write to stderr failed (its reader is gone: a closed pipe, a lost terminal): the console
  // is given up for good, and the log file, if any, keeps every line.
  bool console_lost = false;
  // Lines written before the first set_file (config notices, the distributed setup): they go
  // to the head of that file, so that a rank's log holds its whole story.
  std::vector<std::string> early;
  bool had_file = false;
};

LoggerState& state() {
  static LoggerState s;
  return s;
}

std::string timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

void set_file(const std::string& path) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file.is_open()) s.file.close();
  if (path.empty()) return;
  s.file.open(path, std::ios::app);
  if (!s.had_file) {
    for (const auto& line : s.early) s.file << line << '\n';
    s.file.flush();
    s.early.clear();
    s.had_file = true;
  }
}

void set_rank_prefix(int rank, bool enabled) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.prefix = enabled ? "[rank " + std::to_string(rank) + "] " : "";
}

void set_quiet(bool quiet) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.quiet = quiet;
}

void set_progress_quiet(bool quiet) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.progress_quiet = quiet;
}

bool progress_quiet() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.progress_quiet;
}

namespace {
// Erases the status line the cursor is on (the caller holds the lock).
void erase_status(LoggerState& s) {
  if (s.status.empty() || s.console_lost) return;
  std::cerr << '\r' << std::string(s.status.size(), ' ') << '\r';
}
// After writing to the console: a failed write marks it lost (the caller holds the lock).
void note_console_state(LoggerState& s) {
  std::cerr.flush();
  if (!std::cerr) s.console_lost = true;
}
}  // namespace

void set_status(const std::string& line) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  // Pad over a longer previous line instead of an erase-line escape code.
  if (s.console_lost) return;
  std::string text = line;
  if (text.size() < s.status.size()) text.append(s.status.size() - text.size(), ' ');
  std::cerr << '\r' << text;
  note_console_state(s);
  s.status = line;
}

void clear_status() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  erase_status(s);
  if (!s.console_lost) note_console_state(s);
  s.status.clear();
}

void write(Level level, const std::string& line) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const char* tag = level == Level::kWarn ? "warning: " : level == Level::kError ? "error: " : "";
  if (!(s.quiet && level == Level::kInfo) && !s.console_lost) {
    erase_status(s);
    std::cerr << s.prefix << tag << line << '\n';
    if (!s.status.empty()) std::cerr << s.status;  // the status line again, below
    note_console_state(s);
  }
  if (s.file.is_open()) {
    s.file << timestamp() << ' ' << tag << line << '\n';
    s.file.flush();
  } else if (!s.had_file && s.early.size() < 1000) {
    s.early.push_back(timestamp() + ' ' + tag + line);
  }
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? n : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

}  // namespace lmtrain::log
