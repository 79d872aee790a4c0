#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "core/text_list.h"

namespace lmtrain::model {
namespace {

const std::vector<std::pair<std::string, LoraTarget>>& target_names() {
  static const std::vector<std::pair<std::string, LoraTarget>> names = {
      {"q", LoraTarget::kQ},      {"k", LoraTarget::kK},          {"v", LoraTarget::kV},
      {"o", LoraTarget::kO},      {"mlp_in", LoraTarget::kMlpIn}, {"mlp_out", LoraTarget::kMlpOut},
      {"head", LoraTarget::kHead}};
  return names;
}

// An item of a list that may be written YAML-style ("['q', 'v']"): blanks, brackets and quotes
// around it removed.
std::string strip_list_marks(const std::string& s) {
  const auto b = s.find_first_not_of(" \t[]'\"");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t[]'\"");
  return s.substr(b, e - b + 1);
}

// One adapter on `layer` for rows [offset, offset + rows); name "lora" or "lora_<part>".
void attach(LinearImpl& layer, const std::string& part, int64_t offset, int64_t rows,
            const LoraOptions& o, bool init) {
  const int64_t in = layer.weight.size(1);
  LoraAdapter a(in, rows, offset, o.rank, o.scaling(), o.dropout, o.decay);
  a->to(layer.weight.device(), layer.weight.scalar_type());
  if (init) {
    // kaiming_uniform_(a=sqrt(5)) as nn.Linear and peft: gain sqrt(2 / (1 + 5)), bound =
    // gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    torch::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    a->lora_A.uniform_(-bound, bound);
  }
  layer.add_adapter(part.empty() ? "lora" : "lora_" + part, a);
}

}  // namespace

std::string lora_target_name(LoraTarget t) {
  for (const auto& [name, v] : target_names()) {
    if (v == t) return name;
  }
  return "?";
}

std::string lora_target_list(const std::vector<LoraTarget>& targets) {
  std::string out;
  for (const auto t : targets) out += (out.empty() ? "" : ",") + lora_target_name(t);
  return out;
}

std::vector<LoraTarget> parse_lora_targets(const std::string& text) {
  std::vector<LoraTarget> out;
  for (const auto& piece : core::split_list(text)) {
    const std::string item = strip_list_marks(piece);
    if (item.empty()) continue;
    bool found = false;
    for (const auto& [name, t] : target_names()) {
      if (name != item) continue;
      found = true;
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
    if (!found) {
      throw UsageError("config key 'lora.targets' = '" + text + "': unknown target '" + item +
                       "' (one of: q k v o mlp_in mlp_out head)");
    }
  }
  return out;
}

bool LoraOptions::targets_contain(LoraTarget t) const {
  return std::find(targets.begin(), targets.end(), t) != targets.end();
}

void parse_lora_unfreeze(const std::string& text, LoraOptions& o) {
  for (const auto& piece : core::split_list(text)) {
    const std::string item = strip_list_marks(piece);
    if (item == "norms") {
      o.unfreeze_norms = true;
    } else if (item == "embeddings") {
      o.unfreeze_embeddings = true;
    } else if (item == "head") {
      o.unfreeze_head = true;
    } else if (!item.empty()) {
      throw UsageError("config key 'lora.unfreeze' = '" + text + "': unknown group '" + item +
                       "' (one of: norms embeddings head)");
    }
  }
}

void apply_lora(GptImpl& model, const LoraOptions& o, bool init) {
  // Freeze everything registered so far (the base), but the groups lora.unfreeze names.
  for (auto& m : model.modules(/*include_self=*/true)) {
    auto* t = dynamic_cast<TaggedModule*>(m.get());
    if (!t) continue;
    if (o.unfreeze_norms && dynamic_cast<LayerNormImpl*>(t)) continue;
    if (o.unfreeze_embeddings && dynamic_cast<EmbeddingImpl*>(t)) continue;
    if (o.unfreeze_head && model.lm_head && t == model.lm_head.get()) continue;
    t->freeze();
  }
  const auto& c = model.config();
  const int64_t H = c.n_head, K = c.kv_heads(), D = c.head_dim(), I = c.hidden_dim();
  for (auto& block : model.transformer->blocks) {
    auto& attn = *block->attn;
    if (o.targets_contain(LoraTarget::kQ)) attach(*attn.c_attn, "q", 0, H * D, o, init);
    if (o.targets_contain(LoraTarget::kK)) attach(*attn.c_attn, "k", H * D, K * D, o, init);
    if (o.targets_contain(LoraTarget::kV)) attach(*attn.c_attn, "v", (H + K) * D, K * D, o, init);
    if (o.targets_contain(LoraTarget::kO)) {
      attach(*attn.c_proj, "", 0, attn.c_proj->weight.size(0), o, init);
    }
    if (auto* dense = block->mlp->dense()) {
      auto& mlp = *dense;
      if (o.targets_contain(LoraTarget::kMlpIn)) {
        if (mlp.kind == MlpKind::kSwiGlu) {
          attach(*mlp.c_fc, "gate", 0, I, o, init);
          attach(*mlp.c_fc, "up", I, I, o, init);
        } else {
          attach(*mlp.c_fc, "", 0, mlp.c_fc->weight.size(0), o, init);
        }
      }
      if (o.targets_contain(LoraTarget::kMlpOut)) {
        attach(*mlp.c_proj, "", 0, mlp.c_proj->weight.size(0), o, init);
      }
    }
  }
  if (o.targets_contain(LoraTarget::kHead)) {
    if (!model.lm_head) {
      throw UsageError(
          "config key 'lora.targets' has 'head', but the model ties its head to the "
          "token embedding (model.tie_embeddings=true)");
    }
    attach(*model.lm_head, "", 0, model.lm_head->weight.size(0), o, init);
  }
  model.refresh_param_tags();
  // B A of an adapter on (rows, in) has rank at most min(rows, in): a larger lora.rank trains
  // parameters that add nothing. Say so once, naming the narrowest adapted layer.
  int64_t narrowest = 0;
  std::string where;
  for (const auto& site : lora_sites(model)) {
    const int64_t width = std::min(site.adapter->rows, site.layer->weight.size(1));
    if (narrowest == 0 || width < narrowest) {
      narrowest = width;
      where = site.linear + (site.part.empty() ? "" : " (" + site.part + ")");
    }
  }
  if (narrowest > 0 && o.rank > narrowest) {
    log::warn(
        log::format("lora.rank = %lld exceeds the width of %s (min(rows, in) = %lld): its "
                    "update has rank at most %lld, the extra adapter parameters add "
                    "nothing; lower lora.rank",
                    (long long)o.rank, where.c_str(), (long long)narrowest, (long long)narrowest));
  }
}

std::vector<LoraSite> lora_sites(const GptImpl& model) {
  std::vector<LoraSite> out;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    const auto* layer = dynamic_cast<const LinearImpl*>(item.value().get());
    if (!layer) continue;
    for (const auto& [name, a] : layer->adapters) {
      out.push_back({item.key(), name == "lora" ? "" : name.substr(5), a.get(), layer});
    }
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> merged_state_tensors(const GptImpl& model) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> merged;  // adapted weight name -> W + sum of deltas
  for (const auto& s : lora_sites(model)) {
    const std::string name = s.linear + ".weight";
    auto it = merged.find(name);
    if (it == merged.end()) it = merged.emplace(name, s.layer->weight.detach().clone()).first;
    it->second.narrow(0, s.adapter->row_offset, s.adapter->rows).add_(s.adapter->merged_delta());
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  const auto& tags = model.param_tags();
  for (const auto& [name, t] : model.state_tensors()) {
    auto tag = tags.find(name);
    if (tag != tags.end() && tag->second.lora) continue;
    auto m = merged.find(name);
    out.emplace_back(name, m != merged.end() ? m->second : t.detach());
  }
  return out;
}

}  // namespace lmtrain::model
