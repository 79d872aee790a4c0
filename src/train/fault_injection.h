// Test hook for the failure paths of distributed training: LMTRAIN_FAULT_KILL="R:S" makes rank
// R send itself SIGKILL right after completing step S — a real, uncatchable death mid-run, at
// a reproducible point. It fires only in the first attempt of a job (TORCHELASTIC_RESTART_COUNT
// unset or 0), so a launcher restart then runs clean.
#pragma once
#include <cstdint>

namespace lmtrain::train {

void maybe_inject_fault(int rank, int64_t completed_step);

}  // namespace lmtrain::train
