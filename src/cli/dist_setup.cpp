#include "cli/dist_setup.h"

#include "core/log.h"
#include "dist/process_group.h"

namespace lmtrain::cli {

DistSetup setup_distributed(const core::Config& cfg) {
  DistSetup s;
  s.env = dist::discover_env();
  if (s.env.distributed()) {
    // `lmtrain launch` prefixes every output line itself; under torchrun, mpirun or srun we do.
    log::set_rank_prefix(s.env.rank, !s.env.launched_by_lmtrain);
    // Progress and info lines come from rank 0; the others keep theirs in train.rankN.log and
    // print only warnings and errors.
    if (s.env.rank != 0) log::set_quiet(true);
    log::info(s.env.describe());
  }
  s.group = dist::make_group(s.env, dist::GroupOptions::from_config(cfg));
  return s;
}

}  // namespace lmtrain::cli
