// The names `lmtrain train` writes at the top of a run dir (docs/architecture.md, "The run
// directory"), so that the run-dir claim can tell an abandoned run's files, which a fresh run
// moves aside, from a user's own, which it refuses to touch.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::train {

// The folder of a teacher trained first for distillation (cli/teacher_run.h): a run dir of its
// own, which a rerun resumes or finds complete, so a fresh student run leaves it in place.
inline constexpr const char* kTeacherRunDir = "teacher";

// True for config.yaml, train.log, train.rankN.log, metrics.jsonl, run_state.json, report.html,
// events.out.tfevents.*, checkpoints, teacher, and the temporaries of an atomic write of any of
// them ("config.yaml.tmp.123").
bool is_run_file(const std::string& name);

// The entries of `names` that are not run files.
std::vector<std::string> foreign_files(const std::vector<std::string>& names);

}  // namespace lmtrain::train
