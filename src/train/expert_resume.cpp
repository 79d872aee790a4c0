#include "train/expert_resume.h"

#include <map>
#include <memory>

namespace lmtrain::train {

bool saved_in_ep_layout(const nlohmann::json& meta, int64_t ep) {
  return ep > 1 && has_model_shards(meta) && model_shards_of(meta).value("ep", int64_t{1}) == ep;
}

TensorLocalizer ep_localizer(const model::GptImpl& model, int64_t ep_rank, int64_t ep) {
  auto rows = std::make_shared<std::map<std::string, LocalRows>>();
  const auto& tags = model.param_tags();
  const auto placement = model.expert_placement();
  for (const auto& [name, t] : model.state_tensors()) {
    auto tag = tags.find(name);
    if (tag == tags.end() || !tag->second.expert || t.dim() == 0) continue;
    auto whole = t.sizes().vec();  // (E_local, ...) -> (E, ...)
    whole[0] *= ep;
    (*rows)[name] = LocalRows{0, {{placement.first, placement.first + placement.count}}, whole};
  }
  TensorLocalizer localize;
  localize.rows = [rows](const std::string& name) {
    auto it = rows->find(name);
    return it == rows->end() ? LocalRows{} : it->second;
  };
  localize.cut = [rows](const std::string& name, const at::Tensor& whole) {
    auto it = rows->find(name);
    if (it == rows->end() || whole.sizes().vec() != it->second.whole_shape) return whole;
    const auto [b, e] = it->second.ranges.front();
    return whole.narrow(0, b, e - b).contiguous();
  };
  localize.ep_rank = ep_rank;
  localize.ep = ep;
  return localize;
}

}  // namespace lmtrain::train
