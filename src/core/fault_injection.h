// Test hook for the failure paths: LMTRAIN_FAULT_KILL="R:S" makes rank R send itself SIGKILL
// right after completing step S — a real, uncatchable death mid-run, at a reproducible point;
// LMTRAIN_FAULT_TERM="R:S" sends SIGTERM instead (the graceful stop a scheduler asks for). A
// "step" is a training step, a teacher batch of `lmtrain distill-cache`, or a finished piece of
// `lmtrain prepare` (both rank 0). It fires
// only in the first attempt of a job (TORCHELASTIC_RESTART_COUNT unset or 0), so a launcher
// restart then runs clean. LMTRAIN_FAULT_KILL_SAVE="R:S": rank R is killed in the middle of
// saving step S's checkpoint (after writing its own files, before the others know they are
// complete): the previous checkpoint must stay the latest.
#pragma once
#include <cstdint>

namespace lmtrain::core {

void maybe_inject_fault(int rank, int64_t completed_step);
void maybe_inject_save_fault(int rank, int64_t step);

}  // namespace lmtrain::core
