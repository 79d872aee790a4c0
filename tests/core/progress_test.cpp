// The progress display (core/progress.h): plain periodic lines for files and pipes (no carriage
// returns, no escape codes), a line redrawn in place on a terminal, nothing after --quiet.
#include "core/progress.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/log.h"

namespace lmtrain::core {
namespace {

// Runs `fn` with LMTRAIN_PROGRESS=`mode` and returns what it wrote to stderr.
template <typename Fn>
std::string stderr_of(const char* mode, Fn&& fn) {
  ::setenv("LMTRAIN_PROGRESS", mode, 1);
  ::testing::internal::CaptureStderr();
  fn();
  const std::string out = ::testing::internal::GetCapturedStderr();
  ::unsetenv("LMTRAIN_PROGRESS");
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Progress, LinesModeWritesAPlainLineEachTenthThenADoneLine) {
  // A clock that goes on 0.25 s per item: 50 s in all, a line each tenth (5 s apart), and a
  // line 30 s after the previous one would come with no new tenth (never here).
  double now = 0;
  const std::string out = stderr_of("lines", [&] {
    Progress p("test: counting", 200, "items", [&] { return now; });
    for (int i = 0; i < 200; ++i) {
      now += 0.25;
      p.add(1);
    }
  });
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  const auto lines = lines_of(out);
  // 10% ... 90% (each tenth once), then the last line.
  ASSERT_EQ(lines.size(), 10u) << out;
  for (int tenth = 1; tenth <= 9; ++tenth) {
    const std::string head = "test: counting " + std::to_string(10 * tenth) + "% " +
                             std::to_string(20 * tenth) + "/200 items";
    bool found = false;
    for (const auto& l : lines) found = found || l.rfind(head, 0) == 0;
    EXPECT_TRUE(found) << head << "\n" << out;
  }
  EXPECT_EQ(lines[3], "test: counting 40% 80/200 items, 4 items/s, elapsed 20s, ETA 30s");
  EXPECT_EQ(lines.back(), "test: counting done: 200 items in 50s, 4 items/s");
  for (const auto& l : lines) EXPECT_EQ(l.rfind("test: counting ", 0), 0u) << l;
}

TEST(Progress, AQuickPhaseSaysOnlyItsLastLineAndASlowOneAtLeastEveryThirtySeconds) {
  double now = 0;
  std::string out = stderr_of("lines", [&] {
    Progress p("test: quick", 100, "items", [&] { return now; });
    for (int i = 0; i < 100; ++i) {
      now += 0.001;
      p.add(1);
    }
  });
  EXPECT_EQ(lines_of(out), (std::vector<std::string>{"test: quick done: 100 items in 0.1s, "
                                                     "1000 items/s"}));
  // No total: a line every 30 s.
  now = 0;
  out = stderr_of("lines", [&] {
    Progress p("test: open", 0, "rows", [&] { return now; });
    for (int i = 0; i < 100; ++i) {
      now += 1;
      p.add(10);
    }
  });
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(lines[0], "test: open 300 rows, 10 rows/s, elapsed 30s");
  EXPECT_EQ(lines[3], "test: open done: 1000 rows in 1m40s, 10 rows/s");
}

TEST(Progress, TerminalModeRedrawsOneLineInPlace) {
  const std::string out = stderr_of("terminal", [] {
    Progress p("test: bar", 4, "files");
    p.add(4);
  });
  // Drawn at the start (0%) with "\r", erased, then the last line.
  EXPECT_NE(out.find("\rtest: bar [>                   ] 0% 0/4 files"), std::string::npos) << out;
  EXPECT_NE(out.find("test: bar done: 4 files in "), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no escape codes, blanks erase" << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(Progress, QuietAndOffShowNothing) {
  log::set_progress_quiet(true);
  std::string out = stderr_of("lines", [] {
    Progress p("test: quiet", 10, "items");
    for (int i = 0; i < 10; ++i) p.add(1);
  });
  log::set_progress_quiet(false);
  EXPECT_EQ(out, "");
  out = stderr_of("off", [] {
    Progress p("test: off", 10, "items");
    p.add(10);
  });
  EXPECT_EQ(out, "");
}

// issue 38 item 23: temporal-data printed "1.07B samples/s" for a phase of 0.0 s.
TEST(Progress, APhaseTooShortToTimePrintsNoRate) {
  double now = 0;
  const std::string out = stderr_of("lines", [&] {
    Progress p("test: instant", 1000, "samples", [&] { return now; });
    now = 1e-6;
    p.add(1000);
  });
  EXPECT_EQ(lines_of(out), (std::vector<std::string>{"test: instant done: 1000 samples in 0.0s"}));
  EXPECT_EQ(Progress::format_line("test", 500, 1000, "samples", 0.001, false),
            "test 50% 500/1000 samples, elapsed 0.0s");
  // From kMinRateSeconds on, the rate is a measurement.
  EXPECT_EQ(Progress::format_line("test", 500, 1000, "samples", kMinRateSeconds, false),
            "test 50% 500/1000 samples, 10k samples/s, elapsed 0.1s, ETA 0.1s");
}

TEST(Progress, ALineSaysDoneOverTotalRateAndEta) {
  EXPECT_EQ(Progress::format_line("prepare: encoding", 1240000, 3090000, "bytes", 1.0, false),
            "prepare: encoding 40% 1.24M/3.09M bytes, 1.24M bytes/s, elapsed 1.0s, ETA 1.5s");
  EXPECT_EQ(Progress::format_line("eval", 5, 20, "batches", 10.0, true),
            "eval [=====>              ] 25% 5/20 batches, 0.5 batches/s, ETA 30s");
  EXPECT_EQ(Progress::format_line("import", 1234, 0, "tensors", 0, false),
            "import 1234 tensors, elapsed 0.0s");
  // Stopped short of the total (an error on the way): said as such.
  const std::string out = stderr_of("lines", [] {
    Progress p("test: cut", 10, "items");
    p.add(3);
  });
  EXPECT_NE(out.find("test: cut stopped at 3/10 items after "), std::string::npos) << out;
}

}  // namespace
}  // namespace lmtrain::core
