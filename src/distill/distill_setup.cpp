#include "distill/distill_setup.h"

#include "core/error.h"
#include "core/log.h"
#include "core/seed_mix.h"
#include "distill/teacher.h"

namespace lmtrain::train {
namespace {

std::string describe_pairs(const std::vector<LayerPair>& pairs) {
  std::string out;
  for (const auto& p : pairs) {
    out += (out.empty() ? "" : ",") + std::to_string(p.student) + ":" + std::to_string(p.teacher);
  }
  return out;
}

}  // namespace

std::shared_ptr<DistillObjective> make_distill_objective(const DistillOptions& distill,
                                                         int64_t seq_len, const core::Runtime& rt,
                                                         const model::GptConfig& student,
                                                         const std::string& tokenizer_hash,
                                                         const TeacherCache* cache, uint64_t seed) {
  model::DistillLossSpec spec;
  spec.temperature = distill.temperature;
  spec.alpha = distill.alpha;
  const int64_t chunk = distill.chunk_tokens;
  if (chunk > 0) spec.chunk_rows = chunk;  // 0: full logits online (the cache is always chunked)
  spec.top_k = distill.top_k;
  std::shared_ptr<DistillObjective> objective;
  std::string how;
  if (cache) {
    if (distill.expert_weight > 0 ||
        (distill.feature_weight > 0 && !distill.feature_layers.empty())) {
      throw UsageError(
          "distill.feature_layers and distill.expert_weight compare the teacher's hidden states, "
          "which distill.cache does not hold: leave distill.cache empty (online teacher) or turn "
          "the feature terms off");
    }
    objective = std::make_shared<DistillObjective>(spec);
    how = log::format("teacher's top-%lld read from %s", (long long)cache->info().top_k,
                      cache->path().c_str());
  } else {
    auto teacher = load_teacher(distill, seq_len, rt, student.vocab_size, tokenizer_hash).model;
    auto features = FeatureDistillSpec::make(distill, student, teacher->config());
    objective = std::make_shared<DistillObjective>(std::move(teacher), spec, chunk > 0, features,
                                                   core::mix_seed(seed, 0x6665617475726573ULL));
    how = chunk > 0 ? log::format("in chunks of %lld tokens", (long long)chunk)
                    : std::string("on full logits");
    if (spec.top_k > 0) {
      how += log::format(", teacher restricted to its top-%lld", (long long)spec.top_k);
    }
    const bool projected = features.student_width != features.teacher_width;
    const std::string through = projected ? log::format(" through learned %lld->%lld projections",
                                                        (long long)features.student_width,
                                                        (long long)features.teacher_width)
                                          : std::string();
    if (!features.features.empty()) {
      how += log::format("; + %.3g * feature MSE on layers (student:teacher) %s%s",
                         features.feature_weight, describe_pairs(features.features).c_str(),
                         through.c_str());
    }
    if (!features.experts.empty()) {
      how += log::format("; + %.3g * MoE-output MSE on MoE layers %s%s", features.expert_weight,
                         describe_pairs(features.experts).c_str(), through.c_str());
    }
  }
  log::info(log::format(
      "distillation: loss = %.3g * T^2 KL(teacher || student) + %.3g * ce at T = %.3g, %s",
      spec.alpha, 1 - spec.alpha, spec.temperature, how.c_str()));
  return objective;
}

}  // namespace lmtrain::train
