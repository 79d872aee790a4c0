// train.cuda_graphs refuses what a replayed step cannot repeat, naming the key, on any machine
// (the equivalence of graphed and eager steps needs a GPU: tests/cuda/cuda_training_test.cpp);
// auto turns graphs on only where true would not refuse, on a GPU, once they are proven, and
// says why not; true / false (and a boolean's other spellings) read as before.
#include <gtest/gtest.h>

#include "cli/read_options.h"
#include "core/config.h"
#include "core/error.h"
#include "core/runtime.h"
#include "train/cuda_graph_step.h"

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
  // fp16: the loss scaler and the skip of an overflowing step live on the device.
  core::Runtime fp16 = cuda;
  fp16.precision = core::Precision::kFp16;
  EXPECT_EQ(refusal(core::Config::defaults(), fp16), "");
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

core::Runtime cuda_runtime() {
  core::Runtime rt;  // decide_cuda_graphs reads the device's type only: no GPU needed
  rt.device = c10::Device(c10::kCUDA, 0);
  return rt;
}

TEST(CudaGraphConfig, TrueAndFalseAndABooleansSpellingsReadAsBefore) {
  EXPECT_EQ(core::Config::defaults().get_string("train.cuda_graphs"), "auto");
  for (const char* on : {"true", "TRUE", "on", "yes", "1"}) {
    EXPECT_EQ(with("train.cuda_graphs", on).get_string("train.cuda_graphs"), "true") << on;
  }
  for (const char* off : {"false", "Off", "no", "0"}) {
    EXPECT_EQ(with("train.cuda_graphs", off).get_string("train.cuda_graphs"), "false") << off;
  }
  try {
    with("train.cuda_graphs", "maybe");
    ADD_FAILURE() << "'maybe' was accepted";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train.cuda_graphs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("auto, true, false"), std::string::npos) << msg;
  }
  // A YAML config written when the key was a boolean.
  auto cfg = core::Config::defaults();
  cfg.merge_yaml_text("train:\n  cuda_graphs: true\n", "test yaml");
  EXPECT_EQ(cfg.get_string("train.cuda_graphs"), "true");
}

TEST(CudaGraphConfig, TrueIsOnOrThrowsTheRefusalAndFalseIsOff) {
  const auto t = decide_cuda_graphs(with("train.cuda_graphs", "true"), cuda_runtime(), 1, false);
  EXPECT_TRUE(t.enabled);  // true needs no proof
  EXPECT_EQ(t.why_off, "");
  EXPECT_EQ(t.warmup, 3);
  try {
    decide_cuda_graphs(with("train.cuda_graphs", "true"), core::Runtime::cpu(), 1, true);
    ADD_FAILURE() << "true on a CPU was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              cuda_graphs_refusal(core::Config::defaults(), core::Runtime::cpu(), 1));
  }
  auto muon = with("train.cuda_graphs", "true");
  muon.set("optim.name", "muon", "test");
  EXPECT_THROW(decide_cuda_graphs(muon, cuda_runtime(), 1, true), UsageError);
  const auto f = decide_cuda_graphs(with("train.cuda_graphs", "false"), cuda_runtime(), 1, true);
  EXPECT_FALSE(f.enabled);
  EXPECT_EQ(f.why_off, "");
  EXPECT_EQ(train::describe(f), "CUDA graphs: off (train.cuda_graphs=false)");
  EXPECT_EQ(train::describe(t), "CUDA graphs: on (train.cuda_graphs=true)");
}

TEST(CudaGraphConfig, AutoIsOnOnlyOnAGpuWhereNothingRefusesOnceProven) {
  const auto cfg = core::Config::defaults();  // auto
  // Proven, on a GPU, nothing refused: on (fp16 too: its loss scaler lives on the device).
  const auto on = decide_cuda_graphs(cfg, cuda_runtime(), 1, true);
  EXPECT_TRUE(on.enabled);
  EXPECT_EQ(train::describe(on), "CUDA graphs: on (train.cuda_graphs=auto)");
  auto fp16 = cuda_runtime();
  fp16.precision = core::Precision::kFp16;
  EXPECT_TRUE(decide_cuda_graphs(cfg, fp16, 1, true).enabled);
  // Each refusal of true is auto's reason to stay off, as a value.
  struct Case {
    const char* key;
    const char* value;
    const char* reason;
  };
  for (const Case& c : {Case{"optim.name", "muon", "optim.name=adamw"},
                        Case{"model.dropout", "0.1", "model.dropout=0"},
                        Case{"model.moe.num_experts", "4", "model.moe.num_experts"}}) {
    const auto off = decide_cuda_graphs(with(c.key, c.value), cuda_runtime(), 1, true);
    EXPECT_FALSE(off.enabled) << c.key;
    EXPECT_NE(off.why_off.find(c.reason), std::string::npos) << off.why_off;
  }
  const auto gloo = decide_cuda_graphs(with("dist.backend", "gloo"), cuda_runtime(), 2, true);
  EXPECT_FALSE(gloo.enabled);
  EXPECT_NE(gloo.why_off.find("dist.backend=nccl"), std::string::npos) << gloo.why_off;
  // Several ranks over NCCL: graphs are proven on one GPU only, so auto stays eager there.
  const auto ranks = decide_cuda_graphs(with("dist.backend", "nccl"), cuda_runtime(), 2, true);
  EXPECT_FALSE(ranks.enabled);
  EXPECT_NE(ranks.why_off.find("proven on one GPU only"), std::string::npos) << ranks.why_off;
  EXPECT_TRUE(decide_cuda_graphs(with("dist.backend", "nccl"), cuda_runtime(), 1, true).enabled);
  // A CPU: off, saying so.
  const auto cpu = decide_cuda_graphs(cfg, core::Runtime::cpu(), 1, true);
  EXPECT_FALSE(cpu.enabled);
  EXPECT_NE(cpu.why_off.find("train.device=cuda"), std::string::npos) << cpu.why_off;
  EXPECT_EQ(train::describe(cpu), "CUDA graphs: off (train.cuda_graphs=auto: " + cpu.why_off + ")");
  // Not yet proven: off on a GPU too, naming the constant and how to turn graphs on.
  const auto unproven = decide_cuda_graphs(cfg, cuda_runtime(), 1, false);
  EXPECT_FALSE(unproven.enabled);
  EXPECT_NE(unproven.why_off.find("kCudaGraphsProvenOnGpu"), std::string::npos);
  EXPECT_NE(unproven.why_off.find("train.cuda_graphs=true"), std::string::npos);
  // The default is the constant's: today's (off) until a GPU run flips it.
  EXPECT_EQ(decide_cuda_graphs(cfg, cuda_runtime(), 1).enabled, train::kCudaGraphsProvenOnGpu);
}

}  // namespace
}  // namespace lmtrain::cli
