// RoPE scaling between config.json and lmtrain's model.rope_theta, model.rope_scaling and
// model.rope_* (interop/hf_rope_window.h): rope_overrides reads rope_scaling (4.x) or
// rope_parameters (5.x), write_rope writes both. Split from the config mapping
// (hf_config_read.cpp / hf_config_write.cpp), which calls these for the Llama family.
#include <cmath>

#include "core/config_choice.h"
#include "core/error.h"
#include "interop/hf_json.h"
#include "interop/hf_rope_window.h"

namespace lmtrain::model::hf {
namespace {

using nlohmann::json;

// The rope_type of a rope_scaling / rope_parameters object ("type" in older 4.x configs).
std::string rope_type_of(const json& r, const char* key) {
  if (!r.is_object()) throw UsageError("config.json: " + std::string(key) + " is not an object");
  if (has(r, "rope_type")) return get_or<std::string>(r, "rope_type", "default");
  if (has(r, "type")) return get_or<std::string>(r, "type", "default");
  return "default";
}

// The object that holds the scaling: rope_scaling when set (4.x reads only it; 5.x's
// convert_rope_params_to_dict lets it replace rope_parameters), else rope_parameters.
const json* scaling_object(const json& j, const char** key) {
  const bool top = has(j, "rope_scaling"), nested = has(j, "rope_parameters");
  if (top && nested) {
    const auto a = rope_type_of(j["rope_scaling"], "rope_scaling");
    const auto b = rope_type_of(j["rope_parameters"], "rope_parameters");
    if (a != b && b != "default") {
      throw UsageError("config.json: rope_scaling.rope_type '" + a +
                       "' and rope_parameters.rope_type '" + b + "' disagree");
    }
  }
  *key = top ? "rope_scaling" : "rope_parameters";
  return top ? &j["rope_scaling"] : nested ? &j["rope_parameters"] : nullptr;
}

// RoPE base: 5.x's rope_parameters.rope_theta, else 4.x's top-level rope_theta, else the
// families' default 10000. Both present and different is ambiguous (4.x reads one, 5.x the
// other), so it is an error.
double rope_theta(const json& j) {
  const bool top = has(j, "rope_theta");
  const bool nested = has(j, "rope_parameters") && j["rope_parameters"].is_object() &&
                      has(j["rope_parameters"], "rope_theta");
  const double a = top ? get_or<double>(j, "rope_theta", 0) : 0;
  const double b = nested ? get_or<double>(j["rope_parameters"], "rope_theta", 0) : 0;
  if (top && nested && a != b) {
    throw UsageError("config.json: rope_theta " + num(a) + " and rope_parameters.rope_theta " +
                     num(b) + " disagree");
  }
  return nested ? b : top ? a : 10000.0;
}

// A factor >= 1 (HF warns below 1; lmtrain's model.rope_factor cannot hold it).
double factor_of(const json& r, const std::string& where, double fallback) {
  const double f = get_or<double>(r, "factor", fallback);
  if (!(f >= 1.0)) {
    throw UsageError("config.json: " + where + ".factor must be a number >= 1, got " + num(f));
  }
  return f;
}

// YaRN's mscale: HF get_mscale(scale, m) = 0.1 m ln(scale) + 1 (1 for scale <= 1).
double yarn_mscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

}  // namespace

Overrides rope_overrides(const json& j, int64_t max_pos) {
  if (get_or<double>(j, "partial_rotary_factor", 1.0) != 1.0) {
    throw UsageError("config.json: partial_rotary_factor is not supported (full rotary dimension)");
  }
  const char* key = nullptr;
  const json* r = scaling_object(j, &key);
  const std::string type = r ? rope_type_of(*r, key) : "default";
  const std::string where = key ? key : "rope_parameters";
  if (r && type == "default" && std::string(key) == "rope_parameters" && !has(*r, "rope_theta") &&
      !r->empty() && !has(*r, "rope_type") && !has(*r, "type")) {
    throw UsageError("config.json: rope_parameters " + r->dump() +
                     " is not supported (per-layer-type RoPE; one RoPE for all layers only)");
  }
  if (r && get_or<double>(*r, "partial_rotary_factor", 1.0) != 1.0) {
    throw UsageError("config.json: " + where +
                     ".partial_rotary_factor is not supported (full rotary dimension only)");
  }
  Overrides out = {{"model.rope_theta", num(rope_theta(j))}};
  // Pretraining context of llama3 / yarn (standardize_rope_params: the top-level key first, as
  // Phi3 writes it, then the object's, then max_position_embeddings).
  auto original = [&]() -> int64_t {
    int64_t v = has(j, "original_max_position_embeddings")
                    ? get_or<int64_t>(j, "original_max_position_embeddings", max_pos)
                    : get_or<int64_t>(*r, "original_max_position_embeddings", max_pos);
    if (v < 1) {
      throw UsageError("config.json: " + where +
                       ".original_max_position_embeddings must be >= 1, got " + num(v));
    }
    return v;
  };
  if (type == "default") {
    out.emplace_back("model.rope_scaling", "none");
  } else if (type == "linear") {
    out.insert(out.end(), {{"model.rope_scaling", "linear"},
                           {"model.rope_factor", num(factor_of(*r, where, 0))}});
  } else if (type == "dynamic") {
    out.insert(out.end(), {{"model.rope_scaling", "dynamic"},
                           {"model.rope_factor", num(factor_of(*r, where, 0))},
                           {"model.rope_original_max", num(max_pos)}});
  } else if (type == "llama3") {
    out.insert(out.end(),
               {{"model.rope_scaling", "llama3"},
                {"model.rope_factor", num(factor_of(*r, where, 0))},
                {"model.rope_original_max", num(original())},
                {"model.rope_low_freq_factor", num(get_or<double>(*r, "low_freq_factor", 1.0))},
                {"model.rope_high_freq_factor", num(get_or<double>(*r, "high_freq_factor", 4.0))}});
  } else if (type == "yarn") {
    const int64_t orig = original();
    // No factor: the ratio of the contexts (DeepSeek-V3's configs).
    const double factor = factor_of(*r, where, static_cast<double>(max_pos) / orig);
    double attention = get_or<double>(*r, "attention_factor", 0.0);
    if (has(*r, "attention_factor") && !(attention > 0)) {
      throw UsageError("config.json: " + where + ".attention_factor must be > 0, got " +
                       num(attention));
    }
    const double mscale = get_or<double>(*r, "mscale", 0.0);
    const double mscale_all_dim = get_or<double>(*r, "mscale_all_dim", 0.0);
    if (!has(*r, "attention_factor") && mscale != 0 && mscale_all_dim != 0) {
      attention = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    }
    // HF: `rope_parameters.get("beta_fast") or 32`: 0 and null both mean the default.
    const double beta_fast = get_or<double>(*r, "beta_fast", 0.0);
    const double beta_slow = get_or<double>(*r, "beta_slow", 0.0);
    out.insert(out.end(),
               {{"model.rope_scaling", "yarn"},
                {"model.rope_factor", num(factor)},
                {"model.rope_original_max", num(orig)},
                {"model.rope_attention_factor", num(attention)},
                {"model.rope_beta_fast", num(beta_fast != 0 ? beta_fast : 32.0)},
                {"model.rope_beta_slow", num(beta_slow != 0 ? beta_slow : 1.0)},
                {"model.rope_truncate", get_or<bool>(*r, "truncate", true) ? "true" : "false"}});
  } else {
    throw UsageError("config.json: " + where + ".rope_type '" + type + "' (" + r->dump() +
                     ") is not supported: lmtrain implements RoPE with no scaling, linear, "
                     "dynamic, yarn and llama3");
  }
  return out;
}

void write_rope(json& j, const GptConfig& c) {
  const auto& s = c.rope_scaling;
  json params = json::object();
  switch (s.type) {
    case RopeType::kNone:
      break;
    case RopeType::kLinear:
      params = {{"factor", s.factor}};
      break;
    case RopeType::kDynamic:
      params = {{"factor", s.factor}};
      // HF grows the base past max_position_embeddings; lmtrain's block may be longer.
      j["max_position_embeddings"] = s.original_max;
      break;
    case RopeType::kYarn:
      params = {{"factor", s.factor},
                {"original_max_position_embeddings", s.original_max},
                {"beta_fast", s.beta_fast},
                {"beta_slow", s.beta_slow},
                {"truncate", s.truncate}};
      if (s.attention_factor > 0) params["attention_factor"] = s.attention_factor;
      break;
    case RopeType::kLlama3:
      params = {{"factor", s.factor},
                {"original_max_position_embeddings", s.original_max},
                {"low_freq_factor", s.low_freq_factor},
                {"high_freq_factor", s.high_freq_factor}};
      break;
  }
  const std::string type = s.type == RopeType::kNone ? "default" : core::to_string(s.type);
  j["rope_theta"] = c.rope_theta;
  json nested = params;
  nested["rope_theta"] = c.rope_theta;
  nested["rope_type"] = type;
  j["rope_parameters"] = nested;
  if (s.type == RopeType::kNone) {
    j["rope_scaling"] = nullptr;
  } else {
    params["rope_type"] = type;
    j["rope_scaling"] = params;
  }
}

}  // namespace lmtrain::model::hf
