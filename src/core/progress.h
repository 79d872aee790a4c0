// Progress of a long command (prepare, distill-cache, import/export, eval, generate --prompts)
// on stderr: done/total, rate and ETA.
//  - on a terminal, one status line redrawn in place with "\r" (at most 10 times a second):
//      prepare: encoding [=========>          ] 45% 1.39M/3.09M bytes, 1.2M bytes/s, ETA 1s
//    log lines printed meanwhile appear above it (core/log.h owns stderr);
//  - to a file or a pipe, plain lines, so logs stay clean (no "\r", no escape codes): one each
//    time another tenth of the total is done (at most one a second: a phase that takes less
//    than a second says only its last line), and at least every 30 s, then a last one:
//      prepare: encoding 40% 1.24M/3.09M bytes, 1.2M bytes/s, elapsed 1s, ETA 2s
//      prepare: encoding done: 3.09M bytes in 2.6s, 1.19M bytes/s
//  - a command's --quiet (log::set_progress_quiet) turns it off; LMTRAIN_PROGRESS=off|lines|
//    terminal overrides the choice from stderr (tests draw the terminal form into a pipe).
//
// Why not a library: no C++ progress-bar library is packaged in Debian 12 (apt-cache search
// finds Go, Perl and Haskell ones only), and the header-only ones on GitHub (p-ranav/indicators,
// the most used) always draw with "\r" and ANSI escape codes: they have no plain-line mode for
// logs and pipes, which is half of what is needed, and would fight with our logger over stderr.
// What is left is formatting one line, which is this file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace lmtrain::core {

enum class ProgressMode { kOff, kTerminal, kLines };

// A rate over less time than this is noise, not a measurement (a phase that took 0.0 s would
// claim a billion units a second): no rate is printed below it.
inline constexpr double kMinRateSeconds = 0.05;
inline bool rate_measurable(double seconds) { return seconds >= kMinRateSeconds; }

// The mode new Progress objects use: off after --quiet, else LMTRAIN_PROGRESS, else terminal
// when stderr is one, lines otherwise.
ProgressMode progress_mode();

class Progress {
 public:
  // `what` names the command and the phase ("prepare: encoding"); `total` in `unit`s ("bytes",
  // "windows", "tensors"), 0 when unknown (no bar, no percentage, no ETA). `clock` (tests)
  // gives the seconds since the start; by default the steady clock.
  Progress(std::string what, int64_t total, std::string unit,
           std::function<double()> clock = nullptr);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(int64_t n) { set(done_ + n); }
  void set(int64_t done);
  // The last line ("... done: ...", or "... stopped at ..." short of a known total). Once.
  void finish();

  int64_t done() const { return done_; }

  // One line of the display at `elapsed_s` seconds (tests): with `bar`, the terminal form.
  static std::string format_line(const std::string& what, int64_t done, int64_t total,
                                 const std::string& unit, double elapsed_s, bool bar);

 private:
  double elapsed() const;

  std::string what_, unit_;
  int64_t total_ = 0, done_ = 0;
  ProgressMode mode_;
  std::function<double()> clock_;
  double last_draw_s_ = -1;  // when the last line or redraw was made
  int64_t last_tenth_ = 0;   // tenths of the total reported in lines mode
  bool finished_ = false;
};

}  // namespace lmtrain::core
