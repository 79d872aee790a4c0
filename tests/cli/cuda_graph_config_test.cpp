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
  // fp32 MoE: the experts' GEMMs would loop with host counts.
  EXPECT_NE(refusal(with("model.moe.num_experts", "4"), cuda).find("model.moe.num_experts"),
            std::string::npos);
  core::Runtime fp16 = cuda;
  fp16.precision = core::Precision::kFp16;
  EXPECT_NE(refusal(core::Config::defaults(), fp16).find("train.precision=fp16"),
            std::string::npos);
  core::Runtime bf16 = cuda;
  bf16.precision = core::Precision::kBf16;
  bf16.compute_dtype = at::kBFloat16;
  EXPECT_EQ(refusal(core::Config::defaults(), bf16), "");
}

// An MoE layer reads nothing from the host with every expert local, no capacity and bf16 grouped
// GEMMs (widths and rows in multiples of 8): that is accepted; each other case is refused naming
// its key (the graphed MoE run equal to the eager one: CudaMoeGraph in tests/cuda).
TEST(CudaGraphConfig, AcceptsMoeOnlyWhereItReadsNothingFromTheHost) {
  core::Runtime bf16;
  bf16.device = c10::Device(c10::kCUDA, 0);
  bf16.precision = core::Precision::kBf16;
  bf16.compute_dtype = at::kBFloat16;
  auto moe = with("model.moe.num_experts", "4");  // defaults: dropless, ep 1, widths of 8
  moe.set("model.mlp", "swiglu", "test");
  EXPECT_EQ(refusal(moe, bf16), "");
  auto refused = [&](const std::string& key, const std::string& value, const core::Runtime& rt) {
    auto cfg = moe;
    cfg.set(key, value, "test");
    return refusal(cfg, rt);
  };
  auto msg = refused("dist.ep", "2", bf16);
  EXPECT_NE(msg.find("needs dist.ep=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.moe.num_experts"), std::string::npos) << msg;
  msg = refused("model.moe.capacity_factor", "1.25", bf16);
  EXPECT_NE(msg.find("model.moe.capacity_factor=0"), std::string::npos) << msg;
  msg = refused("model.moe.expert_hidden", "36", bf16);
  EXPECT_NE(msg.find("model.moe.expert_hidden (36)"), std::string::npos) << msg;
  auto odd_rows = moe;
  odd_rows.set("train.micro_batch_size", "3", "test");
  odd_rows.set("data.seq_len", "5", "test");  // 3 * 5 * 2 = 30 expert rows
  msg = refusal(odd_rows, bf16);
  EXPECT_NE(msg.find("train.micro_batch_size * data.seq_len * model.moe.top_k"), std::string::npos)
      << msg;
  core::Runtime fp32 = bf16;
  fp32.precision = core::Precision::kFp32;
  fp32.compute_dtype = at::kFloat;
  msg = refusal(moe, fp32);
  EXPECT_NE(msg.find("needs train.precision=bf16"), std::string::npos) << msg;
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
