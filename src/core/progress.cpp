#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace lmtrain::core {
namespace {

constexpr double kRedrawSeconds = 0.1;  // terminal: at most 10 redraws a second
constexpr double kLineSeconds = 30;     // lines: at least one line this often
constexpr double kLineGapSeconds = 1;   // lines: at most one line a second
constexpr int kBarWidth = 20;

// 1234567 -> "1.23M", 950 -> "950".
std::string progress_count(double v) {
  const double a = std::fabs(v);
  if (a >= 1e12) return log::format("%.3gT", v / 1e12);
  if (a >= 1e9) return log::format("%.3gB", v / 1e9);
  if (a >= 1e6) return log::format("%.3gM", v / 1e6);
  if (a >= 1e4) return log::format("%.3gk", v / 1e3);
  if (a >= 100 || v == std::floor(v)) return log::format("%.0f", v);
  return log::format("%.3g", v);
}

// "2.6s", "1m05s", "2h03m".
std::string progress_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 10) return log::format("%.1fs", s);
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t < 60) return log::format("%llds", (long long)t);
  if (t < 3600) return log::format("%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  return log::format("%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
}

}  // namespace

ProgressMode progress_mode() {
  if (log::progress_quiet()) return ProgressMode::kOff;
  if (const char* env = std::getenv("LMTRAIN_PROGRESS")) {
    if (std::strcmp(env, "off") == 0) return ProgressMode::kOff;
    if (std::strcmp(env, "lines") == 0) return ProgressMode::kLines;
    if (std::strcmp(env, "terminal") == 0) return ProgressMode::kTerminal;
  }
  return ::isatty(STDERR_FILENO) ? ProgressMode::kTerminal : ProgressMode::kLines;
}

Progress::Progress(std::string what, int64_t total, std::string unit, std::function<double()> clock)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(0, total)),
      mode_(progress_mode()),
      clock_(std::move(clock)) {
  if (!clock_) {
    const auto start = std::chrono::steady_clock::now();
    clock_ = [start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
  }
  last_draw_s_ = 0;
  if (mode_ == ProgressMode::kTerminal) {
    log::set_status(format_line(what_, 0, total_, unit_, 0, true));
  }
}

Progress::~Progress() {
  try {
    finish();
  } catch (...) {
    // A destructor never throws; the display is best effort.
  }
}

double Progress::elapsed() const { return clock_(); }

std::string Progress::format_line(const std::string& what, int64_t done, int64_t total,
                                  const std::string& unit, double elapsed_s, bool bar) {
  std::string out = what + " ";
  // No rate (nor an ETA from it) over a time too short to measure.
  const double rate = rate_measurable(elapsed_s) ? static_cast<double>(done) / elapsed_s : 0;
  if (total > 0) {
    const double frac =
        std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    if (bar) {
      const int filled = static_cast<int>(frac * kBarWidth);
      std::string b(kBarWidth, ' ');
      for (int i = 0; i < filled; ++i) b[i] = '=';
      if (filled < kBarWidth) b[filled] = '>';
      out += "[" + b + "] ";
    }
    out += log::format("%d%% ", static_cast<int>(frac * 100));
    out += progress_count(static_cast<double>(done)) + "/" +
           progress_count(static_cast<double>(total)) + " " + unit;
  } else {
    out += progress_count(static_cast<double>(done)) + " " + unit;
  }
  if (rate_measurable(elapsed_s)) out += ", " + progress_count(rate) + " " + unit + "/s";
  if (!bar) out += ", elapsed " + progress_duration(elapsed_s);
  if (total > 0 && done > 0 && done < total && rate > 0) {
    out += ", ETA " + progress_duration(static_cast<double>(total - done) / rate);
  }
  return out;
}

void Progress::set(int64_t done) {
  done_ = done;
  if (mode_ == ProgressMode::kOff || finished_) return;
  const double now = elapsed();
  if (mode_ == ProgressMode::kTerminal) {
    if (now - last_draw_s_ < kRedrawSeconds) return;
    log::set_status(format_line(what_, done_, total_, unit_, now, true));
    last_draw_s_ = now;
    return;
  }
  // Lines: each further tenth of a known total (at most one a second), and at least every
  // kLineSeconds. The total itself gets finish()'s line.
  if (total_ > 0 && done_ >= total_) return;
  const double since = now - last_draw_s_;
  bool due = since >= kLineSeconds;
  if (total_ > 0 && since >= kLineGapSeconds) {
    const int64_t tenth = done_ * 10 / total_;
    if (tenth > last_tenth_) {
      due = true;
      last_tenth_ = tenth;
    }
  }
  if (!due) return;
  log::info(format_line(what_, done_, total_, unit_, now, false));
  last_draw_s_ = now;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == ProgressMode::kOff) return;
  const double now = elapsed();
  if (mode_ == ProgressMode::kTerminal) log::clear_status();
  const std::string rate =
      rate_measurable(now)
          ? ", " + progress_count(static_cast<double>(done_) / now) + " " + unit_ + "/s"
          : "";
  if (total_ > 0 && done_ < total_) {
    log::info(log::format("%s stopped at %s/%s %s after %s", what_.c_str(),
                          progress_count(static_cast<double>(done_)).c_str(),
                          progress_count(static_cast<double>(total_)).c_str(), unit_.c_str(),
                          progress_duration(now).c_str()));
    return;
  }
  log::info(what_ + " done: " + progress_count(static_cast<double>(done_)) + " " + unit_ + " in " +
            progress_duration(now) + rate);
}

}  // namespace lmtrain::core
