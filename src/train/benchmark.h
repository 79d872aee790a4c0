// `lmtrain bench`: steady-state training throughput of a config on random tokens, with the
// model FLOPs and this machine's fp32 GEMM peak so MFU is visible.
//
// FLOPs per token = 6*N + 6*L*C*T (llm.c's count): 6N for the forward+backward matmuls over all
// N parameters, 6*L*C*T for attention scores and weighted sums (causal, forward+backward).
#pragma once
#include <cstdint>
#include <string>

#include "core/runtime.h"
#include "distributed/comm_bytes.h"
#include "distributed/group.h"
#include "train/run_options.h"

namespace lmtrain::train {

struct BenchResult {
  std::string model;
  int threads = 0;
  int workers = 1;
  int64_t tokens_per_step = 0;
  double ms_per_step = 0;
  double tokens_per_s = 0;
  double flops_per_token = 0;
  double achieved_gflops = 0;
  double peak_gemm_gflops = 0;
  double mfu = 0;  // achieved / peak
  int world_size = 1;
  std::string optimizer;
  int64_t state_bytes = 0;          // optimizer state on rank 0
  int64_t model_state_bytes = 0;    // rank 0's parameters + gradients + optimizer state
  int64_t gathered_peak_bytes = 0;  // ZeRO-3: rank 0's gathered block parameters at most
  int64_t peak_rss_bytes = 0;       // rank 0's peak resident set (getrusage)
  int64_t peak_device_bytes = 0;    // GPU: rank 0's max_memory_allocated, timed steps (+ capture)
  std::string runtime;              // device and precision
  // Per step: gradient all-reduce not hidden behind backward, plus (dist.tp) every TP collective.
  double comm_wait_ms = 0;
  dist::CommBytes comm_bytes;  // per timed step: rank 0's bytes sent in collectives
  // Per timed step, CPU time, the mean over ranks: the thread that runs the step, and every other
  // thread of the process (Gloo's, OpenMP's workers, data workers). Beside ms_per_step they say
  // where a data-parallel step's cores went: computing, communicating, or idle (bench/README).
  double step_thread_cpu_ms = 0;
  double other_threads_cpu_ms = 0;
};

// In a distributed job every rank runs the benchmark on its own random batches; the figures are
// global (tokens of all ranks; peak = sum of the ranks' GEMM peaks, measured concurrently).
// On a GPU the peak is bench.peak_tflops when set (e.g. 989 for an H100's dense bf16), else the
// measured GEMM peak in the run's compute dtype.
BenchResult run_benchmark(const BenchOptions& opts, dist::Group& group, const core::Runtime& rt,
                          int local_world_size);

// Best GFLOP/s of a square matmul (n x n) @ (n x n) of `dtype` on `device` over a few
// repetitions.
double measure_gemm_peak_gflops(int64_t n = 1024, int reps = 10,
                                const c10::Device& device = c10::Device(c10::kCPU),
                                at::ScalarType dtype = at::kFloat);

}  // namespace lmtrain::train
