// `lmtrain report` and the trainer's live report.html (issue 25), with the real binary on real
// runs: the page parses as XML, each chart's series has the points its metric logged (or the
// downsampling rule gives) with the extremes kept, two runs overlay with a legend and a config
// diff of exactly the key they differ in, the Markdown card holds the same tables, bad input is
// named, a killed run reports as crashed, and a real browser draws every chart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_report");
    data_ = prepare_synthetic_data(dir_->path());
    // Two runs that differ only in the learning rate, and a small MoE run.
    for (const char* lr : {"3e-3", "1e-3"}) {
      const std::string run = dir_->file(std::string("lr-") + lr);
      auto r = train(run,
                     " --train.max_steps=12 --train.eval_every=4 --checkpoint.every=4"
                     " --optim.lr=" +
                         std::string(lr));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    auto r = train(dir_->file("moe"),
                   " --train.max_steps=6 --model.moe.num_experts=4 --model.moe.top_k=2"
                   " --model.moe.expert_hidden=32");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static CommandResult train(const std::string& run, const std::string& extra) {
    return run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + run + extra);
  }
  static CommandResult report(const std::string& args) {
    return run_command(lmtrain_binary() + " report " + args);
  }
  // check_report.py's reading of `page` (tests/report/check_report.py), with each named run's
  // metrics.jsonl to compare the series with.
  static nlohmann::json check(const std::string& page,
                              const std::vector<std::pair<std::string, std::string>>& runs) {
    std::string args;
    for (const auto& [name, dir] : runs) args += " " + name + "=" + dir + "/metrics.jsonl";
    auto r = run_command(lmtrain_python() + " " + source_dir() + "/tests/report/check_report.py " +
                         page + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return check_result(r);
  }
  static std::string run(const std::string& name) { return dir_->file(name); }

  static TempDir* dir_;
  static std::string data_;
};
TempDir* ReportTest::dir_ = nullptr;
std::string ReportTest::data_;

// Every series drawn from a metric has as many points as the downsampling rule gives for what
// was logged (here all of them), and its minimum and maximum are drawn.
void expect_series_match_the_metrics(const nlohmann::json& result, size_t min_checks) {
  EXPECT_TRUE(result["errors"].empty()) << result["errors"].dump();
  EXPECT_GE(result["checks"].size(), min_checks);
  for (const auto& c : result["checks"]) {
    EXPECT_EQ(c["points"], c["expected_points"]) << c.dump();
    EXPECT_EQ(c["source_points"], c["logged_points"]) << c.dump();
    EXPECT_TRUE(c["extremes_kept"].get<bool>()) << c.dump();
  }
}

TEST_F(ReportTest, TwoRunsOverlayWithALegendAndAConfigDiffOfExactlyTheLr) {
  const std::string page = dir_->file("two.html");
  auto r = report(run("lr-3e-3") + " " + run("lr-1e-3") + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = check(page, {{"lr-3e-3", run("lr-3e-3")}, {"lr-1e-3", run("lr-1e-3")}});
  expect_series_match_the_metrics(result, 12);

  // The config diff: exactly optim.lr.
  const auto diff = result["tables"]["config-diff-table"];
  ASSERT_EQ(diff.size(), 2u) << diff.dump();
  EXPECT_EQ(diff[0], nlohmann::json({"key", "lr-3e-3", "lr-1e-3"}));
  EXPECT_EQ(diff[1][0], "optim.lr");

  // Both runs in one loss chart, in their own colours, with a legend naming them.
  const auto loss = result["charts"]["chart-loss-steps"];
  std::map<std::string, std::set<std::string>> colours;
  std::set<std::string> kinds;
  for (const auto& s : loss["series"]) {
    colours[s["run"]].insert(s["color"]);
    kinds.insert(s["metric"].get<std::string>() + "/" + s["kind"].get<std::string>());
  }
  ASSERT_EQ(colours.size(), 2u) << loss.dump();
  EXPECT_NE(colours["lr-3e-3"], colours["lr-1e-3"]);
  EXPECT_EQ(kinds, (std::set<std::string>{"loss/raw", "loss/ema", "val_loss/"}));
  const auto legend = loss["legend"].get<std::vector<std::string>>();
  for (const char* entry : {"lr-3e-3 train", "lr-3e-3 val", "lr-1e-3 train", "lr-1e-3 val"}) {
    EXPECT_NE(std::find(legend.begin(), legend.end(), entry), legend.end()) << entry;
  }
  // A chart for every metric logged, none for what no run logged (CPU, one rank: no memory,
  // no communication wait, no loss scale).
  std::set<std::string> ids;
  for (const auto& [id, c] : result["charts"].items()) ids.insert(id);
  for (const char* id : {"chart-loss-steps", "chart-loss-tokens", "chart-val-ppl", "chart-lr",
                         "chart-grad-norm", "chart-tokens-per-s"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
  for (const char* id : {"chart-peak-mem-mib", "chart-comm-wait-ms", "chart-loss-scale",
                         "chart-epoch", "chart-elapsed-s"}) {
    EXPECT_FALSE(ids.count(id)) << id;
  }
  // The summary: state, best validation loss, checkpoints.
  std::map<std::string, std::vector<std::string>> summary;
  for (const auto& row : result["tables"]["summary-table"]) {
    summary[row[0]] = row.get<std::vector<std::string>>();
  }
  EXPECT_EQ(summary["state"][1], "finished (at step 12 of 12)");
  EXPECT_EQ(summary["steps"][1], "12 of 12");
  EXPECT_EQ(summary["tokens seen"][1], "6.14k (512 per step)");
  EXPECT_EQ(summary["world size"][1], "1");
  EXPECT_EQ(summary["precision"][1], "fp32");
  EXPECT_EQ(summary["device"][1], "cpu");
  EXPECT_TRUE(contains(summary["best val loss"][1], " at step ")) << summary["best val loss"][1];
  EXPECT_TRUE(contains(summary["parameters"][1], ",")) << summary["parameters"][1];
  EXPECT_EQ(summary["checkpoints"][1],
            "step_00000004, step_00000008, step_00000012 (latest, best)");

  // Each run's own page, rewritten by its trainer, shows it finished.
  const auto own = check(run("lr-3e-3") + "/report.html", {{"lr-3e-3", run("lr-3e-3")}});
  expect_series_match_the_metrics(own, 6);
  EXPECT_EQ(own["tables"]["summary-table"][2][1], "finished (at step 12 of 12)");
}

TEST_F(ReportTest, TheMarkdownCardHasTheSameTablesAndNoCharts) {
  auto r = report(run("lr-3e-3") + " " + run("lr-1e-3") + " --format md");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string& md = r.output;
  EXPECT_TRUE(contains(md, "## Summary\n\n|  | lr-3e-3 | lr-1e-3 |\n|---|---|---|\n")) << md;
  for (const char* row : {"| state | finished (at step 12 of 12) | finished (at step 12 of 12) |",
                          "| world size | 1 | 1 |", "| tokens seen | 6.14k (512 per step) |",
                          "| model | gpt2: 2 layers", "| best val loss | ",
                          "| final val perplexity | ", "| mean tokens/s | ", "| checkpoints | "}) {
    EXPECT_TRUE(contains(md, row)) << row << "\n" << md;
  }
  EXPECT_TRUE(contains(md,
                       "## Config differences\n\nOnly the keys whose values differ (run.dir "
                       "aside).\n\n| key | lr-3e-3 | lr-1e-3 |\n|---|---|---|\n| optim.lr | "))
      << md;
  // Exactly one row in the diff: the line after it ends the table.
  const auto at = md.find("| optim.lr | ");
  const auto next = md.find('\n', at);
  EXPECT_TRUE(next + 1 >= md.size() || md[next + 1] != '|') << md;
  EXPECT_FALSE(contains(md, "<svg"));

  // To a file with --output.
  const std::string card = dir_->file("card.md");
  r = report(run("moe") + " --format md --output " + card);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(read_text(card), "| state | finished (at step 6 of 6) |"));
  // An existing output is refused without --overwrite, replaced with it.
  expect_refused(report(run("moe") + " --format md --output " + card), {card, "--overwrite"});
  EXPECT_EQ(report(run("moe") + " --format md --overwrite --output " + card).exit_code, 0);
}

TEST_F(ReportTest, MoeStatisticsArePerLayerHeatMaps) {
  const std::string page = dir_->file("moe.html");
  auto r = report(run("moe") + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = check(page, {{"moe", run("moe")}});
  expect_series_match_the_metrics(result, 6);
  const auto maps = result["heatmaps"];
  ASSERT_TRUE(maps.contains("heat-moe-moe-load-cv")) << maps.dump();
  for (const auto& [id, m] : maps.items()) {
    EXPECT_EQ(m["rows"], 2) << id;                       // both blocks are MoE layers
    EXPECT_EQ(m["columns"], 6) << id;                    // one column per logged step (log.every=1)
    EXPECT_EQ(m["rects"].get<int>(), 2 * 6 + 10) << id;  // the cells and the colour scale
  }
}

TEST_F(ReportTest, AMillionLoggedStepsStayUnderAFewMegabytesWithTheExtremesKept) {
  // A run dir with 1,000,000 logged steps (and an evaluation every 1000), a spike and a dip.
  const std::string big = dir_->file("big");
  fs::create_directories(big);
  fs::copy_file(run("lr-3e-3") + "/config.yaml", big + "/config.yaml");
  {
    std::ofstream out(big + "/metrics.jsonl");
    char line[160];
    for (int step = 1; step <= 1000000; ++step) {
      double loss = 6.0 - 3.0 * step / 1e6 + 0.05 * ((step * 7919) % 101) / 101.0;
      if (step == 654321) loss = 20.0;
      if (step == 777777) loss = 0.5;
      std::snprintf(line, sizeof(line),
                    "{\"step\":%d,\"loss\":%.6f,\"lr\":%.6g,\"elapsed_s\":%d}\n", step, loss,
                    1e-3 * (1.0 - step / 2e6), step / 10);
      out << line;
      if (step % 1000 == 0) {
        std::snprintf(line, sizeof(line), "{\"step\":%d,\"val_loss\":%.6f}\n", step, loss + 0.1);
        out << line;
      }
    }
  }
  const std::string page = dir_->file("big.html");
  auto r = report(big + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto bytes = fs::file_size(page);
  EXPECT_LT(bytes, 3u << 20) << "the page holds " << bytes << " bytes";
  std::cout << "a million logged steps: " << bytes << " bytes of HTML\n";
  const auto result = check(page, {{"big", big}});
  expect_series_match_the_metrics(result, 4);
  for (const auto& c : result["checks"]) {
    if (c["metric"] != "loss") continue;
    EXPECT_EQ(c["logged_points"], 1000000);
    EXPECT_LE(c["points"].get<int>(), 8000);
    EXPECT_DOUBLE_EQ(c["true_max"].get<double>(), 20.0);
    EXPECT_DOUBLE_EQ(c["true_min"].get<double>(), 0.5);
  }
}

TEST_F(ReportTest, ACutOffLastLineIsSkippedWithANoteAndADamagedLineElsewhereIsNamed) {
  const std::string cut = dir_->file("cut");
  fs::create_directories(cut);
  fs::copy_file(run("lr-3e-3") + "/config.yaml", cut + "/config.yaml");
  const std::string metrics = read_text(run("lr-3e-3") + "/metrics.jsonl");
  write_text(cut + "/metrics.jsonl", metrics + "{\"step\":13,\"loss\":4.12");
  const std::string page = dir_->file("cut.html");
  auto r = report(cut + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = check(page, {{"cut", cut}});
  expect_series_match_the_metrics(result, 6);
  ASSERT_FALSE(result["notes"].empty());
  const std::string notes = result["notes"].dump();
  EXPECT_TRUE(contains(notes, cut + "/metrics.jsonl: the last line (16) is cut off")) << notes;
  EXPECT_TRUE(contains(report(cut + " --format md").output, "## Notes\n\n- " + cut));

  // The same damage on line 3, with lines after it: an error naming FILE:3.
  std::string damaged;
  size_t pos = 0;
  for (int line = 1; line <= 2; ++line) pos = metrics.find('\n', pos) + 1;
  damaged = metrics.substr(0, pos) + "{\"step\":3,\"loss\n" + metrics.substr(pos);
  write_text(cut + "/metrics.jsonl", damaged);
  r = report(cut + " --output " + dir_->file("damaged.html"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, cut + "/metrics.jsonl:3: not a JSON object")) << r.output;
  EXPECT_FALSE(fs::exists(dir_->file("damaged.html")));
}

TEST_F(ReportTest, WhatIsNotARunIsRefusedNamingIt) {
  const std::string empty = dir_->file("empty");
  fs::create_directories(empty);
  expect_refused(report(empty), {empty + " is not a run dir", "metrics.jsonl", "config.yaml"});
  expect_refused(report(dir_->file("nowhere")), {dir_->file("nowhere") + " does not exist"});
  const std::string ckpt = run("lr-3e-3") + "/checkpoints/step_00000004";
  expect_refused(report(ckpt), {ckpt + " is a checkpoint, not a run dir"});
  expect_refused(report(run("moe") + " --format pdf"), {"--format='pdf'", "html or md"});
  expect_refused(report(""), {"give at least one run dir"});
  // Unreadable metrics: a directory where the file should be.
  const std::string odd = dir_->file("odd");
  fs::create_directories(odd + "/metrics.jsonl");
  auto r = report(odd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, odd + "/metrics.jsonl")) << r.output;
}

TEST_F(ReportTest, TheTrainerRewritesItsPageAfterEachEvaluationAndAKilledRunIsCrashed) {
  const std::string killed = run("killed");
  auto r = run_command("LMTRAIN_FAULT_KILL=0:10 " + lmtrain_binary() + " train" +
                       tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + killed +
                       " --train.max_steps=12 --train.eval_every=2 --checkpoint.every=4");
  ASSERT_NE(r.exit_code, 0) << r.output;
  // Killed after step 10 before logging it. report.html as the live run last wrote it: after
  // its 4th evaluation (steps 2, 4, 6, 8).
  // (metrics.jsonl has step 9 since: the page is compared with nothing but itself.)
  const auto live = check(killed + "/report.html", {});
  EXPECT_TRUE(live["errors"].empty()) << live["errors"].dump();
  for (const auto& s : live["charts"]["chart-loss-steps"]["series"]) {
    if (s["metric"] == "val_loss") {
      EXPECT_EQ(s["points"], 4);
    }
    if (s["metric"] == "loss") {
      EXPECT_EQ(s["points"], 8);
    }
  }
  EXPECT_TRUE(contains(live["tables"]["summary-table"][2][1].get<std::string>(), "running"));
  // Read afterwards, the run is crashed: its process is gone without an end.
  auto md = report(killed + " --format md");
  ASSERT_EQ(md.exit_code, 0) << md.output;
  EXPECT_TRUE(contains(md.output, "| state | crashed (pid ")) << md.output;
  EXPECT_TRUE(contains(md.output, "ended without recording an end (killed?); last logged step 9"))
      << md.output;

  // Resumed from step 8 and finished: the new session logs step 9 again; each step is drawn
  // once, the new session's.
  r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                  " --run.dir=" + killed +
                  " --train.max_steps=12 --train.eval_every=2 --checkpoint.every=4"
                  " --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  md = report(killed + " --format md");
  EXPECT_TRUE(contains(md.output, "| state | finished (at step 12 of 12) |")) << md.output;
  EXPECT_TRUE(contains(md.output, " over 2 sessions |")) << md.output;
  const auto after = check(killed + "/report.html", {});
  for (const auto& s : after["charts"]["chart-loss-steps"]["series"]) {
    if (s["metric"] == "loss") {
      EXPECT_EQ(s["points"], 12) << s.dump();
    }
    if (s["metric"] == "val_loss") {
      EXPECT_EQ(s["points"], 6) << s.dump();
    }
  }
}

TEST_F(ReportTest, AStoppedRunIsStoppedAndLogReportFalseWritesNoPage) {
  const std::string stopped = run("stopped");
  auto r = train(stopped, " --train.max_steps=12 --train.stop_at_step=4 --log.report=false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(stopped + "/report.html"));
  auto md = report(stopped + " --format md");
  ASSERT_EQ(md.exit_code, 0) << md.output;
  EXPECT_TRUE(contains(md.output, "| state | stopped (at step 4 of 12 (train.stop_at_step)) |"))
      << md.output;
  // The default writes it, and `lmtrain report RUN` rewrites the run's own page.
  EXPECT_TRUE(fs::exists(run("moe") + "/report.html"));
  r = report(stopped);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "report: " + stopped + "/report.html"));
  EXPECT_TRUE(fs::exists(stopped + "/report.html"));
}

// Headless Chromium (Debian's chromium-headless-shell, scripts/setup.sh) renders the page of
// two short real runs: every chart has drawn pixels in its box, and the console is clean.
TEST_F(ReportTest, ARealBrowserDrawsEveryChartWithoutConsoleErrors) {
  std::string browser;
  for (const char* name : {"chromium-headless-shell", "chromium"}) {
    if (run_command(std::string("command -v ") + name).exit_code == 0) browser = name;
    if (!browser.empty()) break;
  }
  if (browser.empty()) {
    GTEST_SKIP() << "no chromium-headless-shell or chromium on PATH (scripts/setup.sh installs "
                    "chromium-headless-shell)";
  }
  const std::string page = dir_->file("browser.html");
  auto r = report(run("lr-3e-3") + " " + run("lr-1e-3") + " " + run("moe") + " --output " + page);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_python() + " " + source_dir() + "/tests/report/browser_check.py " +
                  browser + " " + page + " " + dir_->file("browser.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto result = check_result(r);
  EXPECT_TRUE(result["errors"].empty()) << result["errors"].dump();
  ASSERT_GE(result["charts"].size(), 8u) << result.dump();
  for (const auto& c : result["charts"]) {
    EXPECT_GT(c["width"].get<double>(), 300) << c.dump();
    // Lines of two or three runs (or a heat map's cells): hundreds of coloured pixels at least.
    EXPECT_GT(c["coloured_pixels"].get<int>(), 300) << c.dump();
  }
}

}  // namespace
}  // namespace lmtrain::testing
