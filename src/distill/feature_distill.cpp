#include "distill/feature_distill.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "core/parse_int.h"
#include "core/text_list.h"

namespace lmtrain::train {
namespace {

int64_t moe_layer_count(const model::GptConfig& c) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) n += c.moe.is_moe_layer(l) ? 1 : 0;
  return n;
}

}  // namespace

int64_t matching_layer(int64_t s, int64_t student_layers, int64_t teacher_layers) {
  const double t = std::round(static_cast<double>(s + 1) * static_cast<double>(teacher_layers) /
                              static_cast<double>(student_layers));
  return std::max<int64_t>(0, static_cast<int64_t>(t) - 1);
}

std::vector<LayerPair> parse_layer_pairs(const std::string& text, int64_t student_layers,
                                         int64_t teacher_layers, const std::string& key) {
  std::vector<LayerPair> pairs;
  if (text.empty()) return pairs;
  if (text == "all") {
    for (int64_t s = 0; s < student_layers; ++s) {
      pairs.push_back({s, matching_layer(s, student_layers, teacher_layers)});
    }
    return pairs;
  }
  auto bad = [&](const std::string& why) {
    return UsageError("config key '" + key + "' = '" + text + "': " + why +
                      " (expected 'S' or 'S:T' layer indices, comma-separated, or 'all')");
  };
  for (const auto& item : core::split_list(text)) {
    const auto parts = core::split_list(item, ':');
    if (parts.size() > 2) throw bad("'" + item + "' has more than one ':'");
    auto index = [&](const std::string& s, int64_t layers, const char* side) {
      auto v = core::parse_nonnegative_int(s, 1 << 20);
      if (!v) throw bad("'" + s + "' is not a layer index");
      if (*v >= layers) {
        throw bad("layer " + s + " is outside the " + side + "'s " + std::to_string(layers) +
                  " layers");
      }
      return *v;
    };
    LayerPair p;
    p.student = index(parts[0], student_layers, "student");
    p.teacher = parts.size() == 2 ? index(parts[1], teacher_layers, "teacher")
                                  : matching_layer(p.student, student_layers, teacher_layers);
    for (const auto& q : pairs) {
      if (q.student == p.student) throw bad("student layer " + parts[0] + " is listed twice");
    }
    pairs.push_back(p);
  }
  return pairs;
}

FeatureDistillSpec FeatureDistillSpec::make(const DistillOptions& distill,
                                            const model::GptConfig& student,
                                            const model::GptConfig& teacher) {
  FeatureDistillSpec spec;
  spec.student_width = student.n_embd;
  spec.teacher_width = teacher.n_embd;
  spec.feature_weight = distill.feature_weight;
  spec.expert_weight = distill.expert_weight;
  if (spec.feature_weight > 0) {
    spec.features = parse_layer_pairs(distill.feature_layers, student.n_layer, teacher.n_layer,
                                      "distill.feature_layers");
  }
  if (spec.expert_weight > 0) {
    const int64_t ms = moe_layer_count(student), mt = moe_layer_count(teacher);
    if (ms == 0 || mt == 0) {
      throw UsageError(
          "config key 'distill.expert_weight' > 0 distills MoE outputs, which needs MoE layers in "
          "both models: the student has " +
          std::to_string(ms) + ", the teacher " + std::to_string(mt));
    }
    for (int64_t s = 0; s < ms; ++s) spec.experts.push_back({s, matching_layer(s, ms, mt)});
  }
  return spec;
}

FeatureProjectionsImpl::FeatureProjectionsImpl(const FeatureDistillSpec& spec, uint64_t seed) {
  if (spec.student_width == spec.teacher_width) return;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(spec.student_width));
  auto make = [&](const std::string& name) {
    auto w = torch::empty({spec.teacher_width, spec.student_width});
    w.uniform_(-bound, bound, gen);
    model::ParamTag tag;
    tag.init = model::InitRule::kKaimingUniform;
    return register_tagged(name, w, tag);
  };
  for (size_t i = 0; i < spec.features.size(); ++i) {
    feature_.push_back(make("feature_" + std::to_string(i)));
  }
  for (size_t i = 0; i < spec.experts.size(); ++i) {
    expert_.push_back(make("expert_" + std::to_string(i)));
  }
}

torch::Tensor FeatureProjectionsImpl::feature(size_t i, const torch::Tensor& x) const {
  return feature_.empty() ? x : torch::linear(x, feature_.at(i));
}

torch::Tensor FeatureProjectionsImpl::expert(size_t i, const torch::Tensor& x) const {
  return expert_.empty() ? x : torch::linear(x, expert_.at(i));
}

torch::Tensor feature_mse(const torch::Tensor& student, const torch::Tensor& teacher) {
  const auto dtype = student.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto diff = student.to(dtype) - teacher.detach().to(dtype);  // (N, C)
  const int64_t rows = std::max<int64_t>(1, diff.size(0));
  return diff.square().sum() / static_cast<double>(rows * std::max<int64_t>(1, diff.size(1)));
}

}  // namespace lmtrain::train
