// train.cuda_graphs refuses what a replayed step cannot repeat, naming the key, on any machine
// (the equivalence of graphed and eager steps needs a GPU: tests/cuda/cuda_training_test.cpp).
#include <gtest/gtest.h>

#include "cli/read_options.h"
#include "core/config.h"
#include "core/error.h"
#include "core/runtime.h"

namespace lmtrain::cli {
namespace {

// The message check_cuda_graphs_config throws for `cfg` on `rt` in a world of `world_size`
// ("" when it accepts).
std::string refusal(const core::Config& cfg, const core::Runtime& rt, int world_size = 1) {
  try {
    check_cuda_graphs_config(cfg, rt, world_size);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

core::Config with(const std::string& key, const std::string& value) {
  auto cfg = core::Config::defaults();
  cfg.set(key, value, "test");
  return cfg;
}

TEST(CudaGraphConfig, RefusesWhatTheHostDecidesPerStepNamingTheKey) {
  core::Runtime cuda;  // the checks read the config first, so a CUDA runtime need not exist
  cuda.device = c10::Device(c10::kCUDA, 0);
  EXPECT_EQ(refusal(core::Config::defaults(), cuda), "");
  EXPECT_NE(refusal(with("optim.name", "muon"), cuda).find("optim.name=adamw"), std::string::npos);
  EXPECT_NE(refusal(with("model.dropout", "0.1"), cuda).find("model.dropout=0"), std::string::npos);
  auto lora = with("lora.rank", "4");
  EXPECT_EQ(refusal(lora, cuda), "");
  lora.set("lora.dropout", "0.05", "test");
  EXPECT_NE(refusal(lora, cuda).find("lora.dropout=0"), std::string::npos);
  EXPECT_NE(refusal(with("model.moe.num_experts", "4"), cuda).find("model.moe.num_experts"),
            std::string::npos);
  // fp16: the loss scaler and the skip of an overflowing step live on the device.
  core::Runtime fp16 = cuda;
  fp16.precision = core::Precision::kFp16;
  EXPECT_EQ(refusal(core::Config::defaults(), fp16), "");
  core::Runtime bf16 = cuda;
  bf16.precision = core::Precision::kBf16;
  bf16.compute_dtype = at::kBFloat16;
  EXPECT_EQ(refusal(core::Config::defaults(), bf16), "");
}

// Gloo stages CUDA tensors through host memory on its own threads: between ranks, a graph
// would not contain the gradient exchange. NCCL (or auto, which is NCCL on CUDA) is captured.
TEST(CudaGraphConfig, RefusesGlooBetweenSeveralRanks) {
  core::Runtime cuda;
  cuda.device = c10::Device(c10::kCUDA, 0);
  const auto gloo = with("dist.backend", "gloo");
  EXPECT_EQ(refusal(gloo, cuda, 1), "");
  EXPECT_NE(refusal(gloo, cuda, 2).find("dist.backend=nccl"), std::string::npos);
  EXPECT_EQ(refusal(with("dist.backend", "nccl"), cuda, 2), "");
  EXPECT_EQ(refusal(core::Config::defaults(), cuda, 2), "");
}

TEST(CudaGraphConfig, NeedsACudaDevice) {
  const auto msg = refusal(core::Config::defaults(), core::Runtime::cpu());
  EXPECT_NE(msg.find("train.cuda_graphs=true needs train.device=cuda"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
}

}  // namespace
}  // namespace lmtrain::cli
