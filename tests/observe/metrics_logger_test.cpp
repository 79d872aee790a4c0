// metrics.jsonl across a kill: a resumed run's logger cuts away the last line a killed run left
// half written, so the file stays one JSON object per line (report/run_metrics.h would
// otherwise meet a damaged line in the middle).
#include "observe/metrics_logger.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lmtrain::train {
namespace {

TEST(MetricsLogger, AResumedRunCutsAwayTheHalfWrittenLastLine) {
  testing::TempDir dir("lmtrain_metrics_logger");
  const std::string path = dir.file("metrics.jsonl");
  const std::string complete = "{\"step\":1,\"loss\":5.0}\n{\"step\":2,\"loss\":4.9}\n";
  testing::write_text(path, complete + "{\"step\":3,\"lo");
  {
    MetricsLogger logger(dir.path(), /*enabled=*/true, /*tensorboard=*/false, 10);
    logger.log_eval(2, 4.5);
  }
  const std::string after = testing::read_text(path);
  ASSERT_EQ(after.substr(0, complete.size()), complete) << after;
  const std::string appended = after.substr(complete.size());
  ASSERT_EQ(appended.find('\n'), appended.size() - 1) << "one line: " << appended;
  EXPECT_EQ(nlohmann::json::parse(appended)["val_loss"], 4.5);
  // A file that ends with its newline is left as it is.
  { MetricsLogger logger(dir.path(), true, false, 10); }
  EXPECT_EQ(testing::read_text(path), after);
}

}  // namespace
}  // namespace lmtrain::train
