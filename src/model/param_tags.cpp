#include "model/param_tags.h"

#include <cmath>

#include "core/error.h"

namespace lmtrain::model {

void init_parameter(torch::Tensor& p, InitRule rule, double std, double resid_std) {
  switch (rule) {
    case InitRule::kZero:
      p.zero_();
      break;
    case InitRule::kOne:
      p.fill_(1.0);
      break;
    case InitRule::kResidualProj:
      p.normal_(0.0, resid_std);
      break;
    case InitRule::kNormal:
      p.normal_(0.0, std);
      break;
    case InitRule::kKaimingUniform: {
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.size(1)));
      p.uniform_(-bound, bound);
      break;
    }
  }
}

torch::Tensor TaggedModule::register_tagged(const std::string& name, torch::Tensor tensor,
                                            ParamTag tag) {
  tags_[name] = tag;
  return register_parameter(name, std::move(tensor));
}

void TaggedModule::freeze() {
  for (auto& [name, tag] : tags_) {
    tag.trainable = false;
    named_parameters(/*recurse=*/false)[name].requires_grad_(false);
  }
}

ParamTags collect_param_tags(const torch::nn::Module& root) {
  ParamTags tags;
  auto add = [&](const torch::nn::Module& m, const std::string& prefix) {
    if (const auto* tagged = dynamic_cast<const TaggedModule*>(&m)) {
      for (const auto& [name, tag] : tagged->own_tags()) tags[prefix + name] = tag;
    }
  };
  add(root, "");  // not through named_modules: a root under construction has no shared_ptr yet
  for (const auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    add(*item.value(), item.key() + ".");
  }
  for (const auto& item : root.named_parameters(/*recurse=*/true)) {
    if (!tags.count(item.key())) {
      throw Error("internal: parameter '" + item.key() + "' was registered without a tag");
    }
  }
  return tags;
}

}  // namespace lmtrain::model
