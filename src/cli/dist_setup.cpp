#include "cli/dist_setup.h"

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"
#include "distributed/debug_level.h"
#include "distributed/process_group.h"
#include "kernels/kernel_switch.h"

namespace lmtrain::cli {
namespace {

kernels::FusedKernelMode kernel_mode(core::FusedKernels choice) {
  switch (choice) {
    case core::FusedKernels::kOn:
      return kernels::FusedKernelMode::kOn;
    case core::FusedKernels::kOff:
      return kernels::FusedKernelMode::kOff;
    case core::FusedKernels::kAuto:
      break;
  }
  return kernels::FusedKernelMode::kAuto;
}

dist::GroupOptions read_group_options(const core::Config& cfg) {
  dist::GroupOptions o;
  o.backend = core::get_choice<dist::BackendChoice>(cfg);
  o.init_timeout_s = cfg.get_float("dist.init_timeout_s");
  o.timeout_s = cfg.get_float("dist.timeout_s");
  return o;
}

}  // namespace

core::Runtime read_runtime(const core::Config& cfg, int local_rank) {
  auto rt = core::Runtime::for_device(core::get_choice<core::DeviceChoice>(cfg), "train.device",
                                      local_rank);
  rt.precision = core::get_choice<core::Precision>(cfg);
  if (rt.precision == core::Precision::kFp16 && !rt.cuda()) {
    throw UsageError(
        "train.precision=fp16 needs CUDA (fp16 matmuls on CPU are emulated and loss scaling "
        "exists for GPUs); use train.precision=bf16 or fp32 on CPU");
  }
  if (rt.precision == core::Precision::kFp8 && rt.cuda() && !core::device_has_fp8(rt.device)) {
    throw UsageError(log::format(
        "train.precision=fp8 needs a GPU with fp8 tensor cores (compute capability 8.9 or newer: "
        "H100, L40S, RTX 4090); %s has %d.%d. Use train.precision=bf16",
        rt.device.str().c_str(), core::cuda_capability(rt.device) / 10,
        core::cuda_capability(rt.device) % 10));
  }
  rt.compute_dtype = rt.precision == core::Precision::kFp16   ? at::kHalf
                     : rt.precision == core::Precision::kFp32 ? at::kFloat
                                                              : at::kBFloat16;  // bf16 and fp8
  rt.reduce_dtype = core::get_choice<core::ReducePrecision>(cfg) == core::ReducePrecision::kBf16
                        ? at::kBFloat16
                        : at::kFloat;
  rt.tf32 = cfg.get_bool("train.tf32");
  rt.fused_kernels = core::get_choice<core::FusedKernels>(cfg);
  rt.attention = core::get_choice<core::AttentionBackend>(cfg);
  return rt;
}

DistSetup setup_distributed(const core::Config& cfg, const dist::EnvLookup& environment) {
  DistSetup s;
  // A bad TORCH_DISTRIBUTED_DEBUG is a usage error on one process too.
  dist::torch_distributed_debug();
  s.env = environment ? dist::discover_env(environment) : dist::discover_env();
  if (s.env.distributed()) {
    // `lmtrain launch` prefixes every output line itself; under torchrun, mpirun or srun we do.
    log::set_rank_prefix(s.env.rank, !s.env.launched_by_lmtrain);
    // Progress and info lines come from rank 0; the others keep theirs in train.rankN.log and
    // print only warnings and errors.
    if (s.env.rank != 0) log::set_quiet(true);
    log::info(s.env.describe());
  }
  s.runtime = read_runtime(cfg, s.env.local_rank);
  s.runtime.activate();
  // LMTRAIN_FUSED_KERNELS=0 in the environment (the benchmarks' A/B switch) keeps them off.
  if (kernels::fused_kernel_mode() != kernels::FusedKernelMode::kOff)
    kernels::set_fused_kernel_mode(kernel_mode(s.runtime.fused_kernels));
  auto options = read_group_options(cfg);
  options.cuda = s.runtime.cuda();
  options.device = s.runtime.device;
  s.group = dist::make_group(s.env, options);
  return s;
}

}  // namespace lmtrain::cli
