// A resume from an earlier checkpoint (an epoch link, a step dir, best) starts another timeline
// in the same run dir: its saves would replace the later checkpoints of the first one
// (step_...44 rewritten with other weights, epoch_3_step_...66 pointing at them). What those
// saves would overwrite, so that the run-dir claim can refuse or move it aside first.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lmtrain::train {

// The step of a resolved checkpoint dir (".../step_00000022"); nullopt for another name.
std::optional<int64_t> checkpoint_dir_step(const std::string& ckpt_dir);

// Entries of RUN_DIR/checkpoints/ a run resumed at `step` could overwrite, as paths relative to
// run_dir ("checkpoints/step_00000044"): the complete step dirs after `step`, then the links
// (latest, best, epoch_N_step_M) that point at one of them. Empty when there are none.
std::vector<std::string> checkpoints_after(const std::string& run_dir, int64_t step);

}  // namespace lmtrain::train
