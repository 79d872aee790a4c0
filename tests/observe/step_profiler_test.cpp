// LMTRAIN_PROFILE's profiler: a trace file that chrome://tracing reads, holding the ops run
// between start and finish.
#include "observe/step_profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lmtrain::train {
namespace {

TEST(StepProfiler, WritesATraceOfTheOpsRunWhileRecording) {
  testing::TempDir dir("lmtrain_profile");
  const auto path = dir.file("trace.json");
  auto a = torch::randn({64, 32}), b = torch::randn({32, 16});
  {
    StepProfiler off("", false);  // no path: records nothing, writes nothing
    EXPECT_FALSE(off.recording());
    off.finish(1);
  }
  StepProfiler profile(path, /*cuda=*/false);
  EXPECT_TRUE(profile.recording());
  auto c = torch::mm(a, b).relu();
  profile.finish(1);
  EXPECT_FALSE(profile.recording());
  const auto trace = nlohmann::json::parse(testing::read_text(path));
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.contains("name")) names.insert(e["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("aten::mm")) << path;
  EXPECT_TRUE(names.count("aten::relu")) << path;
  EXPECT_FALSE(names.count("aten::randn")) << "recorded before the start";
}

}  // namespace
}  // namespace lmtrain::train
