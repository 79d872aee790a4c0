#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/dist_setup.h"
#include "cli/read_options.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/log.h"
#include "train/benchmark.h"
#include "train/loader_benchmark.h"

namespace lmtrain::cli {

int cmd_bench(const Args& argv) {
  auto flags = config_flags();
  flags.push_back({"loader", FlagKind::kBool,
                   "time the streaming loader of the config (data.source=stream) alone"});
  const auto args = parse_args("bench", argv, flags, /*accept_config=*/true);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain bench --config FILE [--section.key=VALUE ...]\n\n"
          "Times bench.steps optimizer steps (after bench.warmup untimed ones) of the\n"
          "config's model and batch on random tokens, then prints:\n"
          "  ms_per_step, tokens_per_s      steady-state speed\n"
          "  flops_per_token                6*N + 6*L*C*T (N parameters active per token: all\n"
          "                                 of a dense model, top_k experts of MoE; L layers, C "
          "width,\n"
          "                                 T seq_len; forward+backward, llm.c's count)\n"
          "  achieved_gflops                flops_per_token * tokens_per_s\n"
          "  peak_gemm_gflops               the best 1024^3 (CPU) or 8192^3 (CUDA) matmul in the\n"
          "                                 compute dtype, or bench.peak_tflops when set (GPU)\n"
          "  mfu                            achieved / peak\n"
          "  peak_rss_mib, peak_device_mib  peak host memory; peak GPU memory (CUDA: allocated,\n"
          "                                 over the timed steps, with a CUDA graph from before\n"
          "                                 its capture: its activations live in its pool)\n"
          "  comm_wait_ms                   gradient all-reduce time not hidden by backward\n"
          "  comm_*_bytes_per_step          bytes rank 0 sent per step in collectives, by kind\n"
          "                                 (ring accounting: an all-reduce of S sends\n"
          "                                 2(W-1)/W S; see distributed/comm_bytes.h)\n"
          "  step_thread_cpu_ms             CPU time per step of the thread that runs it, and of\n"
          "  other_threads_cpu_ms           every other thread (Gloo's, OpenMP's, data workers);\n"
          "                                 the mean over ranks\n\n"
          "With train.cuda_graphs=true the untimed steps also cover the graph's eager steps\n"
          "and its capture. LMTRAIN_PROFILE=FILE records the timed steps with libtorch's\n"
          "profiler: a chrome://tracing trace in FILE, and the GPU kernels and CPU ops that\n"
          "took the most time per step in the log.\n\n"
          "With --loader it times the config's streaming loader alone instead (one process,\n"
          "the whole corpus's training units): (bench.warmup + bench.steps) x accumulation\n"
          "micro-batches from opening the inputs, and prints loader_tokens_per_s, the rate\n"
          "to hold against training's tokens_per_s (the loader must stay ahead).\n\n")) {
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `lmtrain bench`");
  }
  const auto config = load_run_config(args);
  if (args.has("loader")) {
    const auto r = train::run_loader_benchmark(
        read_data_options(config), static_cast<uint64_t>(config.get_int("train.seed")),
        read_batch_plan(config, 1), config.get_int("bench.warmup") + config.get_int("bench.steps"));
    std::cout << "tokenizer_threads: " << r.tokenizer_threads << "\n"
              << "batches: " << r.batches << "\n"
              << "tokens: " << r.tokens << "\n"
              << log::format("seconds: %.3f\n", r.seconds)
              << log::format("first_batch_s: %.3f\n", r.first_batch_s)
              << log::format("loader_tokens_per_s: %.1f\n", r.tokens_per_s);
    return 0;
  }
  auto dist = setup_distributed(config);
  const auto options = read_bench_options(config, dist.group->size(), dist.runtime);
  const auto r =
      train::run_benchmark(options, *dist.group, dist.runtime, dist.env.local_world_size);
  if (dist.env.rank != 0) return 0;
  std::cout << "model: " << r.model << "\n"
            << "world_size: " << r.world_size << "\n"
            << "optimizer: " << r.optimizer << "\n"
            << "optimizer_state_bytes_per_rank: " << r.state_bytes << "\n"
            << "model_state_bytes_per_rank: " << r.model_state_bytes << "\n"
            << "gathered_peak_bytes: " << r.gathered_peak_bytes << "\n"
            << r.runtime << "\n"  // "runtime: cuda:0, bf16 (...)"
            << log::format("peak_rss_mib: %.1f\n", r.peak_rss_bytes / 1048576.0)
            << log::format("peak_device_mib: %.1f\n", r.peak_device_bytes / 1048576.0)
            << "threads: " << r.threads << "\n"
            << "workers: " << r.workers << "\n"
            << "tokens_per_step: " << r.tokens_per_step << "\n"
            << log::format("ms_per_step: %.2f\n", r.ms_per_step)
            << log::format("flops_per_token: %.4g\n", r.flops_per_token)
            << log::format("achieved_gflops: %.2f\n", r.achieved_gflops)
            << log::format("peak_gemm_gflops: %.2f\n", r.peak_gemm_gflops)
            << log::format("mfu: %.3f\n", r.mfu)
            << log::format("comm_wait_ms: %.2f\n", r.comm_wait_ms)
            << "comm_bytes_per_step: " << r.comm_bytes.total() << "\n"
            << "comm_all_reduce_bytes_per_step: " << r.comm_bytes.all_reduce << "\n"
            << "comm_all_gather_bytes_per_step: " << r.comm_bytes.all_gather << "\n"
            << "comm_reduce_scatter_bytes_per_step: " << r.comm_bytes.reduce_scatter << "\n"
            << "comm_broadcast_bytes_per_step: " << r.comm_bytes.broadcast << "\n"
            << "comm_all_to_all_bytes_per_step: " << r.comm_bytes.all_to_all << "\n"
            << log::format("step_thread_cpu_ms: %.2f\n", r.step_thread_cpu_ms)
            << log::format("other_threads_cpu_ms: %.2f\n", r.other_threads_cpu_ms)
            << log::format("tokens_per_s: %.1f\n", r.tokens_per_s);
  return 0;
}

}  // namespace lmtrain::cli
