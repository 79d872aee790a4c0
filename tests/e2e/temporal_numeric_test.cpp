// A numeric answer from the curve (issue 26): the period of a periodic series (8 to 16 time
// steps for lengths 48 and 64), written in digits by the tiny LM of temporal_fixture.h (warmed on
// the period questions' text, the period in digits at the series' place) with
// configs/temporal-tiny.yaml's encoder pooled to one soft token (the description is one number),
// the LM frozen, and scored by `lmtrain eval --temporal_qa` by relative error: the share of greedy
// answers within 10% of the truth and the median relative error, against the text-only and
// shuffled-series baselines. About a minute (the LM 2000 steps, the encoder 2000 steps of 16).
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "e2e/temporal_fixture.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

class TemporalNumeric : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fixture_ = new TemporalFixture;
    TemporalLmSpec spec = TemporalLmSpec::qa_scale();
    spec.tasks = " --tasks period";
    fixture_->build("lmtrain_temporal_numeric", spec);
  }
  static void TearDownTestSuite() { delete fixture_; }
  static TemporalFixture* fixture_;
};
TemporalFixture* TemporalNumeric::fixture_ = nullptr;

TEST_F(TemporalNumeric, ThePeriodComesFromTheCurve) {
  ASSERT_FALSE(HasFatalFailure());
  const auto& f = *fixture_;
  const std::string run = f.dir->file("period");
  auto r = run_command(lmtrain_binary() + " train --config " + source_dir() +
                       "/configs/temporal-tiny.yaml --model.init_from=" + f.lm +
                       "/checkpoints/latest --data.temporal.dir=" + f.samples +
                       // One question, so nothing competes for the encoder: a faster rate.
                       " --model.temporal.num_tokens=1 --optim.lr=1e-3"
                       " --train.micro_batch_size=16 --train.threads=1 --log.every=100"
                       " --train.eval_every=0 --checkpoint.every=0 --train.max_steps=2000"
                       " --run.dir=" +
                       run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " eval --checkpoint " + run + " --temporal_qa --json " +
                  f.dir->file("qa.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cout << r.output;
  const auto qa = nlohmann::json::parse(read_text(f.dir->file("qa.json")));
  const auto& t = qa["tasks"]["period"];
  ASSERT_GE(t["samples"].get<int>(), 100);
  EXPECT_EQ(t["options"].get<int>(), 0);  // numeric: no options, no chance level
  const double within = t["curve"]["within_10pct"], median = t["curve"]["median_rel_error"];
  const double text_within = t["text_only"]["within_10pct"],
               text_median = t["text_only"]["median_rel_error"];
  const double shuffled_within = t["shuffled"]["within_10pct"],
               shuffled_median = t["shuffled"]["median_rel_error"];
  // More answers within 10% than either baseline gives, and a smaller median error.
  EXPECT_GE(within, text_within + 0.1);
  EXPECT_GE(within, shuffled_within + 0.1);
  EXPECT_LE(median, 0.8 * text_median);
  EXPECT_LE(median, 0.8 * shuffled_median);
}

}  // namespace
}  // namespace lmtrain::testing
