#include "cli/dist_setup.h"

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

}  // namespace

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
  s.runtime = core::Runtime::from_config(cfg, s.env.local_rank);
  s.runtime.activate();
  // LMTRAIN_FUSED_KERNELS=0 in the environment (the benchmarks' A/B switch) keeps them off.
  if (kernels::fused_kernel_mode() != kernels::FusedKernelMode::kOff)
    kernels::set_fused_kernel_mode(kernel_mode(s.runtime.fused_kernels));
  auto options = dist::GroupOptions::from_config(cfg);
  options.cuda = s.runtime.cuda();
  options.device = s.runtime.device;
  s.group = dist::make_group(s.env, options);
  return s;
}

}  // namespace lmtrain::cli
