#include "cli/read_cuda_graphs.h"

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"
#include "distributed/process_group.h"
#include "optim/optimizer_factory.h"
#include "options/read_model.h"
#include "train/data_options.h"

namespace lmtrain::cli {
namespace {

// An MoE layer reads nothing from the host when every expert is local (no exchange sized on the
// host), nothing is dropped by capacity (no kept counts on the host) and its expert GEMMs are
// CUDA grouped GEMMs, which take the group offsets on the device (model/grouped_linear.h):
// bf16 compute with row lengths and row counts in whole 16-byte units. Anything else would
// read the counts inside the capture, which fails.
template <class Refuse>
void check_moe_for_cuda_graphs(const core::Config& cfg, const core::Runtime& rt,
                               const Refuse& refuse) {
  const std::string with_moe = "with MoE (model.moe.num_experts > 0) ";
  if (cfg.get_int("dist.ep") > 1) {
    refuse(with_moe +
           "needs dist.ep=1: expert parallelism sizes the token exchange on the host each step");
  }
  if (cfg.get_float("model.moe.capacity_factor") > 0) {
    refuse(with_moe +
           "needs model.moe.capacity_factor=0 (dropless): capacity counts the kept rows on the "
           "host each step");
  }
  if (rt.compute_dtype != at::kBFloat16) {
    refuse(with_moe +
           "needs train.precision=bf16: the experts' grouped GEMM runs on the GPU in bf16 only, "
           "other precisions loop over experts with the counts on the host");
  }
  const model::GptConfig m = options::read_gpt_config(cfg, options::kTokenizerLater);
  const int64_t rows = cfg.get_int("train.micro_batch_size") * cfg.get_int("data.seq_len") *
                       m.moe.top_k;  // expert rows per forward, dropless
  const int64_t unit = 8;            // bf16 elements in 16 bytes
  if (m.n_embd % unit != 0 || m.moe.expert_hidden % unit != 0 || rows % unit != 0) {
    refuse(with_moe +
           log::format("needs model.n_embd (%lld), model.moe.expert_hidden (%lld) and "
                       "train.micro_batch_size * data.seq_len * model.moe.top_k (%lld) to be "
                       "multiples of 8: the grouped GEMM's alignment, else the experts loop "
                       "with the counts on the host",
                       (long long)m.n_embd, (long long)m.moe.expert_hidden, (long long)rows));
  }
}

}  // namespace

std::string cuda_graphs_refusal(const core::Config& cfg, const core::Runtime& rt, int world_size) {
  std::string first;  // the first check that refuses names the run's reason
  auto refuse = [&first](const std::string& why) {
    if (!first.empty()) return;
    first = "train.cuda_graphs=true " + why +
            " (a captured step replays the host's decisions of its capture)";
  };
  if (core::get_choice<optim::OptimizerName>(cfg) != optim::OptimizerName::kAdamW) {
    refuse("needs optim.name=adamw: Muon's update is not captured");
  }
  if (cfg.get_float("model.dropout") > 0) {
    refuse("needs model.dropout=0: dropout masks are seeded on the host per step");
  }
  if (cfg.get_int("lora.rank") > 0 && cfg.get_float("lora.dropout") > 0) {
    refuse("needs lora.dropout=0: dropout masks are seeded on the host per step");
  }
  if (core::get_choice<train::DataFormat>(cfg) == train::DataFormat::kChat) {
    refuse("needs data.format=tokens: a chat batch's width follows its longest conversation");
  }
  if (cfg.get_int("model.moe.num_experts") > 0) check_moe_for_cuda_graphs(cfg, rt, refuse);
  if (cfg.get_int("dist.zero") == 3) {
    refuse("needs dist.zero <= 2: ZeRO-3 gathers and frees parameters from gradient hooks");
  }
  if (world_size > 1 && core::get_choice<dist::BackendChoice>(cfg) == dist::BackendChoice::kGloo) {
    refuse(
        "needs dist.backend=nccl (or auto) between several ranks: Gloo copies CUDA tensors "
        "through host memory on its own threads, which a graph cannot capture");
  }
  if (first.empty() && !rt.cuda()) {
    first = "train.cuda_graphs=true needs train.device=cuda (this run computes on " +
            rt.device.str() + ")";
  }
  return first;
}

void check_cuda_graphs_config(const core::Config& cfg, const core::Runtime& rt, int world_size) {
  const std::string why = cuda_graphs_refusal(cfg, rt, world_size);
  if (!why.empty()) throw UsageError(why);
}

train::CudaGraphOptions decide_cuda_graphs(const core::Config& cfg, const core::Runtime& rt,
                                           int world_size, bool proven) {
  train::CudaGraphOptions o;
  o.choice = core::get_choice<train::CudaGraphsChoice>(cfg);
  o.warmup = cfg.get_int("train.cuda_graph_warmup");
  switch (o.choice) {
    case train::CudaGraphsChoice::kTrue:
      check_cuda_graphs_config(cfg, rt, world_size);
      o.enabled = true;
      break;
    case train::CudaGraphsChoice::kFalse:
      break;
    case train::CudaGraphsChoice::kAuto:
      o.why_off = cuda_graphs_refusal(cfg, rt, world_size);
      if (o.why_off.empty() && !proven) {
        o.why_off =
            "no GPU run has proven them yet (kCudaGraphsProvenOnGpu, src/train/"
            "cuda_graph_step.h); train.cuda_graphs=true turns them on";
      }
      // The device run that proved graphs had one GPU: collectives inside a captured step
      // have not run yet, so auto leaves several ranks eager until a multi-GPU run shows it.
      if (o.why_off.empty() && world_size > 1) {
        o.why_off =
            "graphs are proven on one GPU only, not yet with collectives across ranks; "
            "train.cuda_graphs=true turns them on";
      }
      o.enabled = o.why_off.empty();
      break;
  }
  return o;
}

}  // namespace lmtrain::cli
