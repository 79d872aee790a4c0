// A distillation run's options (distill.*), typed: read once by the command
// (cli/read_options.cpp) and handed to the teacher (teacher.h) and the objective's set-up
// (distill_setup.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/config_choice.h"

namespace lmtrain::train {

// distill.teacher_dtype, in the order of its choices (core/config_choice.h). auto: the runtime's
// compute dtype on CUDA, fp32 on a CPU.
enum class TeacherDtype { kAuto, kFp32, kBf16 };
constexpr core::ChoiceKey choice_key(TeacherDtype) { return {"distill.teacher_dtype", 3}; }

struct DistillOptions {
  bool enabled = false;      // distill.enabled
  std::string teacher;       // distill.teacher: a checkpoint, run dir or link
  std::string cache;         // distill.cache: an offline teacher's top-k logits
  double temperature = 0;    // distill.temperature
  double alpha = 0;          // distill.alpha
  int64_t chunk_tokens = 0;  // distill.chunk_tokens (0 = full logits)
  TeacherDtype teacher_dtype = TeacherDtype::kAuto;  // distill.teacher_dtype
  int64_t top_k = 0;                                 // distill.top_k (0 = the full distribution)
  std::string feature_layers;  // distill.feature_layers ("S" or "S:T", comma-separated)
  double feature_weight = 0;   // distill.feature_weight
  double expert_weight = 0;    // distill.expert_weight
};

}  // namespace lmtrain::train
