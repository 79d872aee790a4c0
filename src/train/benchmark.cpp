#include "train/benchmark.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>

#include "core/log.h"
#include "core/threads.h"
#include "distributed/group.h"
#include "model/build_model.h"
#include "observe/step_profiler.h"
#include "optim/flat_params.h"
#include "optim/optimizer_factory.h"
#include "parallel/fully_shard.h"
#include "parallel/hybrid_shard.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/tp_regions.h"
#include "train/cuda_graph_step.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {
using Clock = std::chrono::steady_clock;

// CPU seconds used so far by the calling thread and by the whole process.
struct CpuTimes {
  double thread_s = 0, process_s = 0;
};
CpuTimes cpu_times_now() {
  auto seconds = [](clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  return {seconds(CLOCK_THREAD_CPUTIME_ID), seconds(CLOCK_PROCESS_CPUTIME_ID)};
}
}  // namespace

double measure_gemm_peak_gflops(int64_t n, int reps, const c10::Device& device,
                                at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions(dtype).device(device);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts),
       c = torch::empty({n, n}, opts);
  at::mm_out(c, a, b);  // warm up (thread pool, caches, cuBLAS handles)
  core::synchronize(device);
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    at::mm_out(c, a, b);
    core::synchronize(device);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

BenchResult run_benchmark(const BenchOptions& opts, dist::Group& group, const core::Runtime& rt,
                          int local_world_size) {
  const RunOptions& run = opts.run;
  BenchResult r;
  r.runtime = rt.describe();
  r.world_size = group.size();
  r.threads = core::configure_threads(run.threads, local_world_size);
  const auto& mcfg = opts.model.shape;
  const auto& plan = run.batch;
  torch::manual_seed(run.seed);
  // dist.tp > 1: built unwritten on the CPU in fp32, each rank drawing and keeping only its
  // slices (tensor_parallel_plan.h, tp_local_init.h); data parallelism, ZeRO and the batches
  // then go over `dp`, world / tp ranks.
  core::Runtime build_rt = rt;
  if (run.tp > 1) {
    build_rt.device = c10::Device(c10::kCPU);
    build_rt.param_dtype = at::kFloat;
  }
  auto model = model::build_model(opts.model, build_rt, {/*init=*/run.tp <= 1, {}});
  parallel::TpGroups tp_groups;
  std::unique_ptr<parallel::TensorParallel> tp;
  if (run.tp > 1) {
    tp_groups = parallel::make_tp_groups(group, run.tp);
    parallel::check_tensor_parallel(mcfg, plan.seq_len, run.tp);
    torch::manual_seed(run.seed);
    tp = std::make_unique<parallel::TensorParallel>(
        *model, *tp_groups.tp, parallel::TpFromSeed{rt.device, rt.param_dtype});
  }
  dist::Group& dp = tp ? *tp_groups.dp : group;
  // ZeRO-3 shards over the world or, under HSDP, this rank's shard group.
  parallel::ShardGroups shards;
  if (run.optimizer.zero == 3) {
    shards = parallel::make_shard_groups(dp, run.optimizer.shard_group_size);
  }
  dist::Group& shard_group = shards.shard_group(dp);
  optim::FlatParams flat(*model, model->param_tags(),
                         optim::flat_pad_multiple(run.optimizer, shard_group.size()),
                         optim::flat_grad_buffer(run.optimizer, shard_group.size()));
  auto opt_ptr = optim::make_optimizer(run.optimizer, flat, shard_group);
  auto& opt = *opt_ptr;
  r.optimizer = opt.name();
  r.state_bytes = opt.state_bytes();
  // Model state held by this rank: parameters and gradients (whole, or ZeRO-3's shards) and
  // the optimizer's state.
  r.model_state_bytes = 2 * flat.numel() * flat.options().dtype().itemsize() + r.state_bytes;
  std::unique_ptr<parallel::FullyShard> fsdp;
  if (run.optimizer.zero == 3 && shard_group.size() > 1) {
    fsdp = std::make_unique<parallel::FullyShard>(
        *model, flat, shard_group, shards.replicas.get(), run.optimizer.reshard_after_forward,
        parallel::gather_dtype_for(rt.precision, tp != nullptr));
    fsdp->set_reduce_dtype(rt.reduce_dtype);
    fsdp->install();
    const auto b = fsdp->bytes();
    r.model_state_bytes = b.param_shard + b.grad_shard + r.state_bytes;
  }
  model->train();

  // A fixed pool of random batches per replica (the TP ranks of one read the same), generated
  // before timing.
  torch::manual_seed(run.seed + 1 + dp.rank());
  const int64_t pool = 8;
  std::vector<torch::Tensor> batches;
  for (int64_t i = 0; i < pool; ++i) {
    batches.push_back(
        torch::randint(mcfg.vocab_size, {plan.micro_batch, plan.seq_len + 1}, torch::kLong)
            .to(rt.device));
  }
  int64_t counter = 0;
  const BatchFn next = [&](int64_t) {
    auto& b = batches[counter++ % pool];
    return Batch::lm(b.narrow(1, 0, plan.seq_len), b.narrow(1, 1, plan.seq_len));
  };
  const double lr = run.optimizer.lr, clip = run.grad_clip;
  const int64_t warmup = opts.warmup, steps = opts.steps;
  log::info(mcfg.describe());
  log::info(plan.describe());
  log::info(describe(run.cuda_graphs));
  r.workers = tp ? 1 : resolve_workers(run.workers, r.threads, plan.micro_batch);
  TrainStepper stepper(*model, flat, opt, dp, rt, r.workers, run.seed, run.bucket_bytes(),
                       LossScaler(false, 1, 1), nullptr, fsdp.get());
  if (tp) stepper.use_tensor_parallel(*tp, *tp_groups.tp, shard_group);
  // train.cuda_graphs (checked by the command): the warm-up also covers the graph's eager steps
  // and its capture.
  std::unique_ptr<CudaGraphStep> graphed;
  if (run.cuda_graphs.enabled) {
    graphed = std::make_unique<CudaGraphStep>(stepper, opt, run.cuda_graphs.warmup);
  }
  auto one_step = [&] {
    return graphed ? graphed->step(plan.accum_steps, next, lr, clip)
                   : stepper.step(plan.accum_steps, next, lr, clip);
  };
  // With a graph, the untimed steps cover its eager steps, the capture and one replay.
  const int64_t untimed = graphed ? std::max<int64_t>(warmup, run.cuda_graphs.warmup + 2) : warmup;
  // The peak GPU memory: eager, over the timed steps; with a graph, from before its capture,
  // because the step's activations are allocated while it is captured and live on in the graph's
  // private pool (replays allocate nothing: a peak over them alone was only the model state,
  // GPT-2 124M's 1,966 MiB against 7,923 eager on 2026-11-27).
  if (graphed) core::reset_peak_device_memory(rt.device);
  for (int64_t i = 0; i < untimed; ++i) one_step();
  if (graphed) {
    log::info(log::format("bench: CUDA graph captured; %lld untimed steps", (long long)untimed));
  }
  core::synchronize(rt.device);
  group.barrier();
  if (!graphed) core::reset_peak_device_memory(rt.device);
  // LMTRAIN_PROFILE=FILE records the timed steps (observe/step_profiler.h).
  const char* profile_path = std::getenv("LMTRAIN_PROFILE");
  StepProfiler profile(profile_path ? profile_path : "", rt.cuda());
  auto t0 = Clock::now();
  const CpuTimes cpu0 = cpu_times_now();
  const auto sent_before = dist::comm_bytes_so_far();
  double comm_wait_s = 0;
  take_tp_comm_seconds();  // the warm-up's
  for (int64_t i = 0; i < steps; ++i) {
    comm_wait_s += one_step().comm_wait_s;
  }
  comm_wait_s += take_tp_comm_seconds();  // all of TP's collectives block the step
  core::synchronize(rt.device);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const CpuTimes cpu1 = cpu_times_now();
  r.comm_bytes = (dist::comm_bytes_so_far() - sent_before).divided_by(steps);
  profile.finish(steps);

  r.model = mcfg.describe();
  r.tokens_per_step = plan.tokens_per_step();
  r.ms_per_step = secs / steps * 1e3;
  r.tokens_per_s = static_cast<double>(plan.tokens_per_step()) * steps / secs;
  // Active parameters: an MoE token runs top_k of the experts, not all of them.
  r.flops_per_token = 6.0 * mcfg.active_params() +
                      6.0 * mcfg.n_layer * mcfg.n_embd * static_cast<double>(plan.seq_len);
  r.achieved_gflops = r.flops_per_token * r.tokens_per_s / 1e9;
  r.comm_wait_ms = comm_wait_s / steps * 1e3;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  r.peak_device_bytes = core::peak_device_memory(rt.device);
  if (fsdp) r.gathered_peak_bytes = fsdp->bytes().gathered_peak;
  const double nominal_tflops = opts.peak_tflops;
  const double my_peak =
      rt.cuda() && nominal_tflops > 0
          ? nominal_tflops * 1e3
          : measure_gemm_peak_gflops(rt.cuda() ? 8192 : 1024, 10, rt.device, rt.compute_dtype);
  // One exchange for the peak (summed: the world's) and the CPU times (averaged over ranks).
  const double step_thread_s = cpu1.thread_s - cpu0.thread_s;
  const double other_s = std::max(0.0, (cpu1.process_s - cpu0.process_s) - step_thread_s);
  auto sums = torch::tensor({my_peak, step_thread_s, other_s}, torch::kFloat64);
  group.allreduce(sums, dist::ReduceOp::kSum)->wait();
  const auto host = sums.accessor<double, 1>();
  r.peak_gemm_gflops = host[0];
  const double per_rank_step_ms = 1e3 / (steps * static_cast<double>(group.size()));
  r.step_thread_cpu_ms = host[1] * per_rank_step_ms;
  r.other_threads_cpu_ms = host[2] * per_rank_step_ms;
  r.mfu = r.achieved_gflops / r.peak_gemm_gflops;
  return r;
}

}  // namespace lmtrain::train
