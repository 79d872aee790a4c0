// `lmtrain report` on hostile run dirs (issue 38): a FIFO or a device where metrics.jsonl should
// be is refused instead of hanging or filling memory, as is a file over the size cap; extreme
// values are left out of the charts, which say so, instead of drawing nan coordinates; a
// "running" state whose pid now belongs to another process is told apart by the run dir's lock.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "core/file_lock.h"
#include "report/run_metrics.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

CommandResult report_of(const std::string& args) {
  return run_command(lmtrain_binary() + " report " + args);
}

const char* kTwoSteps = "{\"step\":1,\"loss\":4.5}\n{\"step\":2,\"loss\":4.25}\n";

// Item 12: only a regular file is read, up to a cap; the report names what it found instead.
TEST(ReportInput, AFifoADeviceOrAnOversizedFileAtMetricsJsonlIsRefusedNotRead) {
  TempDir dir("lmtrain_report_input");
  const std::string fifo_run = dir.file("fifo");
  fs::create_directories(fifo_run);
  ASSERT_EQ(::mkfifo((fifo_run + "/metrics.jsonl").c_str(), 0600), 0);
  auto r = report_of(fifo_run + " --format md");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot read " + fifo_run +
                                     "/metrics.jsonl: it is a FIFO (named pipe), and only a "
                                     "regular file is read there"))
      << r.output;

  const std::string zero_run = dir.file("zero");
  fs::create_directories(zero_run);
  fs::create_symlink("/dev/zero", zero_run + "/metrics.jsonl");
  r = report_of(zero_run + " --format md");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, zero_run + "/metrics.jsonl: it is a character device"))
      << r.output;

  // One byte over the cap (sparse: nothing is written), refused before a byte is read.
  const std::string big_run = dir.file("big");
  fs::create_directories(big_run);
  write_text(big_run + "/metrics.jsonl", kTwoSteps);
  fs::resize_file(big_run + "/metrics.jsonl", report::kMaxMetricsBytes + 1);
  r = report_of(big_run + " --format md");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, big_run + "/metrics.jsonl: it holds 1073741825 bytes, more than "
                                           "the 1.0 GiB (1073741824 bytes) read at most"))
      << r.output;
}

// Item 9: ±1e308 in the loss and the learning rate: every drawn coordinate is a number, and the
// charts that left points out say how many.
TEST(ReportInput, ExtremeValuesAreLeftOutOfTheChartsAndTheChartsSaySo) {
  TempDir dir("lmtrain_report_extreme");
  const std::string run = dir.file("run");
  fs::create_directories(run);
  write_text(run + "/metrics.jsonl",
             "{\"step\":1,\"loss\":1e308,\"lr\":0.001}\n"
             "{\"step\":2,\"loss\":-1e308,\"lr\":1e308}\n"
             "{\"step\":3,\"loss\":4.5,\"lr\":0.002}\n"
             "{\"step\":4,\"loss\":4.25,\"lr\":0.003}\n");
  const std::string page = dir.file("page.html");
  auto r = report_of(run + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = read_text(page);
  const std::regex coordinates(R"((?:points|cx|cy|x|y|x1|y1|x2|y2)="([^"]*)\")");
  int checked = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), coordinates);
       it != std::sregex_iterator(); ++it) {
    const std::string value = (*it)[1];
    EXPECT_FALSE(contains(value, "nan") || contains(value, "inf")) << (*it)[0];
    ++checked;
  }
  EXPECT_GT(checked, 50);
  EXPECT_TRUE(contains(html, "data-skipped-points=\"")) << html.substr(0, 2000);
  EXPECT_TRUE(contains(html, "beyond +/-1e150 or not finite are not drawn"));
  EXPECT_TRUE(contains(html, "1 point beyond +/-1e150 or not finite is not drawn"));  // lr
  // The page stays well-formed XML.
  r = run_command(lmtrain_python() + " -c \"import xml.etree.ElementTree as E; E.parse('" + page +
                  "'); print('xml ok')\"");
  EXPECT_TRUE(contains(r.output, "xml ok")) << r.output;
}

// Item 13: run_state.json says running with a pid that is alive (this test's own), but the run
// dir's lock is free: the pid is another process now, and the run is crashed. With the lock
// held, it is running.
TEST(ReportInput, ARunningStateWhosePidIsReusedIsCrashedWhenTheLockIsFree) {
  TempDir dir("lmtrain_report_pid");
  const std::string run = dir.file("run");
  fs::create_directories(run);
  write_text(run + "/metrics.jsonl", kTwoSteps);
  const long pid = static_cast<long>(::getpid());
  write_text(run + "/run_state.json", "{\"state\": \"running\", \"pid\": " + std::to_string(pid) +
                                          ", \"host\": \"" + core::host_name() +
                                          "\", \"started_unix\": 1}\n");
  write_text(run + "/.lock", "pid 1 on host " + core::host_name() + "\n");
  auto r = report_of(run + " --format md");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| state | crashed (pid " + std::to_string(pid) +
                                     " ended without recording an end (killed?); that pid now "
                                     "belongs to another process (the run dir's lock is free)"))
      << r.output;

  auto held = core::FileLock::try_acquire(run + "/.lock", "pid " + std::to_string(pid) + "\n");
  ASSERT_TRUE(held.has_value());
  r = report_of(run + " --format md");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| state | running (pid " + std::to_string(pid))) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
