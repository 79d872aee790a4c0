// train.cuda_graphs: the whole training step (every micro-batch's forward and backward, the
// gradient all-reduce, clipping and the optimizer update) captured once into a CUDA graph and
// then replayed: one launch per step instead of thousands of kernel launches, whose host time
// bounds small models on fast GPUs (what torch.cuda.graph and torch.compile's
// "reduce-overhead" mode do in Python).
//
// A replay repeats the captured kernels on the captured memory, so:
// - each step's batch is copied into static input tensors before the replay;
// - the learning rate is written into the optimizer's device scalar (Optimizer::hold_lr), and
//   the step count advances on the device;
// - loss, metrics, gradient norm and fp16's skip flag come back in static tensors, copied out
//   after each replay;
// - fp16's loss scaler lives on the device (optim/loss_scaler.h): the scale, its clean-step and
//   skipped-step counts and the found_inf flag are device tensors that the replay updates, and
//   an overflowing step skips the optimizer's update on the device (Optimizer::step_unless);
// - nothing the host decides may change between steps. The command refuses what does
//   (cli::check_cuda_graphs_config): dropout (masks seeded on the host per step), MoE with
//   expert parallelism, capacity or non-grouped expert GEMMs (they size rows on the host), Muon,
//   and Gloo between several ranks (it moves CUDA tensors through the host, outside any graph).
// The first train.cuda_graph_warmup steps run eagerly on the graph's side stream (cuBLAS
// workspaces, NCCL communicators and the allocator settle, as capture requires); the next step
// is captured and replayed, and every later one replays. Results equal eager steps:
// CudaGraph* in tests/cuda/cuda_training_test.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "optim/optimizer.h"
#include "train/run_options.h"
#include "train/train_step.h"

namespace lmtrain::train {

// Whether train.cuda_graphs=auto may turn graphs on (where the device is CUDA and nothing in
// cli::check_cuda_graphs_config refuses the run). Proven by the device run of 2026-11-27 (H100
// 80GB HBM3): every assertion of CudaTest.CudaGraphStepsEqualEagerSteps,
// CudaGraphFp16StepsWithSkipsEqualEagerSteps, CudaGraphBenchReportsReplayedSteps and
// CudaMoeGraph.CudaGraphMoeStepsEqualEagerSteps passed (graphed = eager steps); the test
// processes then crashed in their temp-dir cleanup, a link-order fault of the test binary
// (CMakeLists.txt's lmtrain_bind_libstdcxx_first), not of the graphs.
inline constexpr bool kCudaGraphsProvenOnGpu = true;

// The start's log line: "CUDA graphs: on (train.cuda_graphs=true)", or off with, under auto,
// why ("CUDA graphs: off (train.cuda_graphs=auto: <why>)").
std::string describe(const CudaGraphOptions& o);

class CudaGraphStep {
 public:
  // `warmup` >= 1 eager steps before the capture. Throws in a build without CUDA.
  CudaGraphStep(TrainStepper& stepper, optim::Optimizer& optimizer, int64_t warmup);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // TrainStepper::step's contract. Every step must bring the same micro-batch count and shapes
  // and the same grad_clip (captured); lr may change. comm_wait_s is 0 for replays.
  StepResult step(int64_t accum_steps, const BatchFn& next_batch, double lr, double grad_clip);
  bool captured() const;
  // Waits until every step so far has finished on the GPU, polling so that it can give up:
  // NCCL's watchdog does not watch collectives inside a graph, so with a peer rank stuck or
  // dead the next read of a result would block forever. Throws Error naming `rank` and the
  // key after `timeout_s` (dist.timeout_s). Call it before reading a step's results.
  void wait_for_steps(double timeout_s, int rank) const;

 private:
  struct Impl;  // CUDA types stay out of this header
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmtrain::train
