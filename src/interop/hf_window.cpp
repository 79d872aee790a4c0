// Sliding-window attention between config.json and lmtrain's model.windows
// (interop/hf_rope_window.h): window_overrides reads Mistral's and Mixtral's sliding_window and
// Qwen2/Qwen3's sliding layers, write_windows writes each family's keys. Split from the config
// mapping (hf_config_read.cpp / hf_config_write.cpp), which calls these; Qwen3-MoE's windows are
// refused on import there.
#include <algorithm>

#include "core/config_choice.h"
#include "core/error.h"
#include "interop/hf_json.h"
#include "interop/hf_rope_window.h"

namespace lmtrain::model::hf {
namespace {

using nlohmann::json;

// The sliding layers of a Qwen2/Qwen3 config.json: layer_types (5.x), else the layers from
// max_window_layers on (4.x, and 5.x's default layer_types). n_layer is checked small enough
// to list by the caller.
std::vector<bool> qwen_sliding_layers(const json& j, int64_t n_layer) {
  std::vector<bool> sliding(static_cast<size_t>(n_layer), false);
  if (has(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != n_layer) {
      throw UsageError("config.json: layer_types must list num_hidden_layers entries");
    }
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t != "sliding_attention" && t != "full_attention") {
        throw UsageError("config.json: layer_types[" + std::to_string(i) + "] '" + t +
                         "' is not supported (full_attention, sliding_attention)");
      }
      sliding[i] = t == "sliding_attention";
    }
    return sliding;
  }
  const int64_t first = get_or<int64_t>(j, "max_window_layers", n_layer);
  for (int64_t l = std::max<int64_t>(first, 0); l < n_layer; ++l) sliding[l] = true;
  return sliding;
}

// sliding_window as a size: a positive integer.
int64_t window_size(const json& j) {
  const auto w = get_or<int64_t>(j, "sliding_window", 0);
  if (w < 1) throw UsageError("config.json: sliding_window must be >= 1 or null, got " + num(w));
  return w;
}

}  // namespace

Overrides window_overrides(const json& j, Arch type, int64_t n_layer, int64_t context) {
  const Overrides none = {{"model.windows", ""}};
  if (type == Arch::kMistral || type == Arch::kMixtral) {
    // Every layer slides whenever sliding_window is set (no use_sliding_window switch).
    if (!has(j, "sliding_window")) return none;
    const int64_t w = window_size(j);
    return w >= context ? none : Overrides{{"model.windows", num(w)}};
  }
  if (type != Arch::kQwen2 && type != Arch::kQwen3) return none;
  // 5.x clears sliding_window unless use_sliding_window; layer_types then slides nothing.
  if (!get_or<bool>(j, "use_sliding_window", false) || !has(j, "sliding_window")) return none;
  const int64_t w = window_size(j);
  if (w >= context) return none;
  if (n_layer > 4096) {
    throw UsageError("config.json: num_hidden_layers " + num(n_layer) +
                     " with sliding windows is more layers than lmtrain holds");
  }
  const auto sliding = qwen_sliding_layers(j, n_layer);
  std::string list;
  bool any = false;
  for (bool s : sliding) {
    list += (list.empty() ? "" : ",") + (s ? num(w) : std::string("0"));
    any = any || s;
  }
  return any ? Overrides{{"model.windows", list}} : none;
}

void write_windows(json& j, const GptConfig& c) {
  const std::string arch = core::to_string(c.arch);
  const std::string windows = describe_windows(c);
  if (c.arch == Arch::kMistral || c.arch == Arch::kMixtral) {
    j["sliding_window"] = nullptr;
    if (!c.windowed()) return;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.window(l) != c.window(0)) {
        throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                         " has one sliding window for every layer");
      }
    }
    j["sliding_window"] = c.window(0);
    return;
  }
  if (c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe) {
    // Full layers first, then windowed ones of one size: Qwen's max_window_layers.
    int64_t first = c.n_layer, w = 0;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.window(l) > 0 && first == c.n_layer) first = l, w = c.window(l);
      if (l >= first && c.window(l) != w) {
        throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                         " slides the layers from max_window_layers on, all with one window");
      }
    }
    if (c.windowed() && c.arch == Arch::kQwen3Moe) {
      throw UsageError("model.windows = " + windows +
                       ": export of qwen3_moe with sliding "
                       "windows is not supported");
    }
    std::vector<std::string> types;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      types.push_back(l >= first ? "sliding_attention" : "full_attention");
    }
    j["use_sliding_window"] = c.windowed();
    j["sliding_window"] = c.windowed() ? json(w) : json(nullptr);
    j["max_window_layers"] = first;
    j["layer_types"] = types;
    return;
  }
  if (c.windowed()) {
    throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                     " has no sliding-window attention (mistral, qwen2 and qwen3 do)");
  }
}

}  // namespace lmtrain::model::hf
