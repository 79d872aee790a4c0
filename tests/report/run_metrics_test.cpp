// Reading metrics.jsonl for the report (report/run_metrics.h): every number is a series, found
// by name; per-layer arrays become per-layer series; a resumed session replaces what it logs
// again; a cut-off last line is skipped with a note, a damaged line elsewhere names its line.
#include "report/run_metrics.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace lmtrain::report {
namespace {

const char* kTwoSteps =
    "{\"step\":1,\"epoch\":0,\"loss\":5.5,\"lr\":0.001,\"elapsed_s\":1.0,\"qa\":{\"acc\":0.25}}\n"
    "{\"step\":2,\"epoch\":0,\"loss\":5.0,\"lr\":0.002,\"elapsed_s\":2.0,\"moe\":[{\"layer\":1,"
    "\"load_cv\":0.5,\"dropped\":0},{\"layer\":3,\"load_cv\":0.25,\"dropped\":0.1}]}\n"
    "{\"step\":2,\"val_loss\":4.5,\"val_ppl\":90.0}\n";

TEST(RunMetrics, EveryNumberIsASeriesFoundByName) {
  const auto m = parse_metrics(kTwoSteps, "m.jsonl");
  EXPECT_EQ(m.records, 3);
  ASSERT_TRUE(m.scalars.count("loss"));
  EXPECT_EQ(m.scalars.at("loss").step, (std::vector<double>{1, 2}));
  EXPECT_EQ(m.scalars.at("loss").value, (std::vector<double>{5.5, 5.0}));
  EXPECT_EQ(m.scalars.at("val_loss").value, (std::vector<double>{4.5}));
  EXPECT_EQ(m.scalars.at("qa/acc").value, (std::vector<double>{0.25})) << "nested, flattened";
  EXPECT_FALSE(m.scalars.count("step"));
  ASSERT_TRUE(m.per_layer.count("moe/load_cv"));
  EXPECT_EQ(m.per_layer.at("moe/load_cv").size(), 2u);
  EXPECT_EQ(m.per_layer.at("moe/load_cv").at(3).value, (std::vector<double>{0.25}));
  EXPECT_EQ(m.per_layer.at("moe/dropped").at(3).value, (std::vector<double>{0.1}));
  EXPECT_DOUBLE_EQ(m.train_seconds, 2.0);
  EXPECT_EQ(m.sessions, 1);
  EXPECT_TRUE(m.notes.empty());
}

TEST(RunMetrics, ACutOffLastLineIsSkippedWithANote) {
  const std::string text = std::string(kTwoSteps) + "{\"step\":3,\"loss\":4.";
  const auto m = parse_metrics(text, "run/metrics.jsonl");
  EXPECT_EQ(m.scalars.at("loss").size(), 2u);
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("run/metrics.jsonl: the last line (4) is cut off"), std::string::npos)
      << m.notes[0];
  // A damaged last line that does end in a newline is skipped too.
  const auto m2 = parse_metrics(std::string(kTwoSteps) + "{\"step\":3,\"lo\n\n", "x.jsonl");
  ASSERT_EQ(m2.notes.size(), 1u);
  EXPECT_NE(m2.notes[0].find("the last line (4)"), std::string::npos) << m2.notes[0];
}

TEST(RunMetrics, ADamagedLineInTheMiddleNamesItsLine) {
  const std::string text =
      "{\"step\":1,\"loss\":5.5}\n{\"step\":2,\"loss\":5.\n{\"step\":3,\"loss\":5.0}\n";
  try {
    parse_metrics(text, "run/metrics.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run/metrics.jsonl:2: not a JSON object"),
              std::string::npos)
        << e.what();
  }
  try {
    parse_metrics("{\"loss\":1}\n{\"step\":2}\n", "m.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.jsonl:1: the record has no integer \"step\""),
              std::string::npos)
        << e.what();
  }
}

TEST(RunMetrics, AResumedSessionReplacesTheStepsItLogsAgain) {
  // Session 1 logs steps 1..4 (eval at 2) and dies; session 2 resumes from the checkpoint at 2.
  const std::string text =
      "{\"step\":1,\"loss\":6,\"elapsed_s\":1}\n{\"step\":2,\"loss\":5,\"elapsed_s\":2}\n"
      "{\"step\":2,\"val_loss\":5.5}\n{\"step\":3,\"loss\":4,\"elapsed_s\":3}\n"
      "{\"step\":4,\"loss\":3,\"elapsed_s\":4}\n{\"step\":4,\"val_loss\":4.5}\n"
      "{\"step\":3,\"loss\":4.1,\"elapsed_s\":0.5}\n{\"step\":4,\"loss\":3.1,\"elapsed_s\":1.5}\n";
  const auto m = parse_metrics(text, "m.jsonl");
  EXPECT_EQ(m.scalars.at("loss").step, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(m.scalars.at("loss").value, (std::vector<double>{6, 5, 4.1, 3.1}));
  EXPECT_EQ(m.scalars.at("val_loss").step, (std::vector<double>{2})) << "session 1's eval at 4";
  EXPECT_EQ(m.sessions, 2);
  EXPECT_DOUBLE_EQ(m.train_seconds, 4 + 1.5);
}

TEST(RunMetrics, FedInPiecesEqualsReadWhole) {
  const std::string text = kTwoSteps;
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    MetricsReader r("m.jsonl");
    r.feed(text.substr(0, cut));
    const auto partial = r.finish();  // the live report reads while a line may be half written
    EXPECT_LE(partial.records, 3);
    r.feed(text.substr(cut));
    const auto m = r.finish();
    EXPECT_EQ(m.records, 3) << cut;
    EXPECT_EQ(m.scalars.at("loss").value, (std::vector<double>{5.5, 5.0})) << cut;
    EXPECT_EQ(r.bytes_fed(), text.size());
  }
}

}  // namespace
}  // namespace lmtrain::report
