// The teacher a distillation run trains first (distill.teacher empty, no distill.cache): its
// config is the student's, at the width distill.teacher_hidden_size (default twice the
// student's), for distill.teacher_steps steps, in RUN_DIR/teacher. `lmtrain train` runs it as a
// run of its own before the student (distill/teacher.h loads it from there).
#pragma once
#include <optional>

#include "core/config.h"
#include "model/gpt_config.h"

namespace lmtrain::cli {

// The teacher's config for a teacher trained first: `student` (resolved) at the teacher width.
core::Config teacher_training_config(const core::Config& student, const model::GptConfig& mcfg);

// The run that trains the teacher first, or none: a config when `cfg` distils from an online
// teacher and distill.teacher is empty (teacher_training_config of the student's shape, which
// takes the vocabulary from data.dir's tokenizer), and says so in the log. The command runs it
// as a run of its own (all ranks take part), then sets distill.teacher to its run.dir.
std::optional<core::Config> teacher_training_run(const core::Config& cfg);

}  // namespace lmtrain::cli
