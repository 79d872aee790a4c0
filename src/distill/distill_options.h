// A distillation run's options (distill.*), typed: read once by the command
// (cli/read_options.cpp) and handed to the teacher (teacher.h) and the objective's set-up
// (distill_setup.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/config_choice.h"
#include "core/config_schema.h"

namespace lmtrain::train {

// distill.teacher_dtype, in the order of its choices (core/config_choice.h). auto: the runtime's
// compute dtype on CUDA, fp32 on a CPU.
enum class TeacherDtype { kAuto, kFp32, kBf16 };
constexpr core::ChoiceKey choice_key(TeacherDtype) { return {"distill.teacher_dtype", 3}; }

// Each member starts at its key's schema default (core/config_schema.h).
struct DistillOptions {
  bool enabled = core::default_bool("distill.enabled");
  // A checkpoint, run dir or link.
  std::string teacher = core::default_string("distill.teacher");
  // An offline teacher's top-k logits.
  std::string cache = core::default_string("distill.cache");
  double temperature = core::default_float("distill.temperature");
  double alpha = core::default_float("distill.alpha");
  int64_t chunk_tokens = core::default_int("distill.chunk_tokens");  // 0 = full logits
  TeacherDtype teacher_dtype = core::default_choice<TeacherDtype>();
  int64_t top_k = core::default_int("distill.top_k");  // 0 = the full distribution
  // "S" or "S:T", comma-separated.
  std::string feature_layers = core::default_string("distill.feature_layers");
  double feature_weight = core::default_float("distill.feature_weight");
  double expert_weight = core::default_float("distill.expert_weight");
};

}  // namespace lmtrain::train
