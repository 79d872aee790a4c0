// train.cuda_graphs read and decided (train/cuda_graph_step.h): what a config and runtime
// refuse of a captured step, which replays the host's decisions of its capture, each refusal
// naming the key that asks for it.
#pragma once
#include <string>

#include "core/config.h"
#include "core/runtime.h"
#include "train/cuda_graph_step.h"

namespace lmtrain::cli {

// Why train.cuda_graphs=true cannot work with this config and runtime in a world of
// `world_size` ranks (train/cuda_graph_step.h: a captured step replays the host's decisions),
// naming the key; "" when it can. The config checks come before the device check, so they hold
// on any machine.
std::string cuda_graphs_refusal(const core::Config& cfg, const core::Runtime& rt, int world_size);
// Throws UsageError with cuda_graphs_refusal()'s reason, if any.
void check_cuda_graphs_config(const core::Config& cfg, const core::Runtime& rt, int world_size);

// train.cuda_graphs and its warm-up, decided: true is on (and throws check_cuda_graphs_config's
// refusal), false off; auto is on when the device is CUDA, nothing is refused and graphs are
// `proven` on a GPU (train::kCudaGraphsProvenOnGpu), else off with the reason in why_off.
train::CudaGraphOptions decide_cuda_graphs(const core::Config& cfg, const core::Runtime& rt,
                                           int world_size,
                                           bool proven = train::kCudaGraphsProvenOnGpu);

}  // namespace lmtrain::cli
