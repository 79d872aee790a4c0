// Builds a distillation run's objective from its options (distill.*): the logit loss against the
// online teacher (loaded from distill.teacher) or the offline cache, plus the feature and
// MoE-output terms, and logs what it will optimise.
#pragma once
#include <memory>
#include <string>

#include "core/runtime.h"
#include "distill/distill_objective.h"
#include "distill/distill_options.h"
#include "distill/teacher_cache.h"
#include "model/gpt_config.h"

namespace lmtrain::train {

// cache: the opened distill.cache, or null for the online teacher (distill.teacher). seq_len:
// data.seq_len (the teacher must see a whole window). seed: train.seed (the feature projections'
// initial draw). Throws UsageError for feature terms with an offline teacher.
std::shared_ptr<DistillObjective> make_distill_objective(const DistillOptions& distill,
                                                         int64_t seq_len, const core::Runtime& rt,
                                                         const model::GptConfig& student,
                                                         const std::string& tokenizer_hash,
                                                         const TeacherCache* cache, uint64_t seed);

}  // namespace lmtrain::train
