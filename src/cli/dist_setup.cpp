#include "cli/dist_setup.h"

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"
#include "distributed/debug_level.h"
#include "distributed/process_group.h"

namespace lmtrain::cli {
namespace {

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
  rt.compute_dtype = rt.precision == core::Precision::kBf16   ? at::kBFloat16
                     : rt.precision == core::Precision::kFp16 ? at::kHalf
                                                              : at::kFloat;
  rt.reduce_dtype = core::get_choice<core::ReducePrecision>(cfg) == core::ReducePrecision::kBf16
                        ? at::kBFloat16
                        : at::kFloat;
  rt.tf32 = cfg.get_bool("train.tf32");
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
  auto options = read_group_options(cfg);
  options.cuda = s.runtime.cuda();
  options.device = s.runtime.device;
  s.group = dist::make_group(s.env, options);
  return s;
}

}  // namespace lmtrain::cli
