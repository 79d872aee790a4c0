#include "infer/kv_cache_policy.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/parse_int.h"
#include "infer/h2o_kv_cache.h"
#include "infer/streaming_kv_cache.h"

namespace lmtrain::infer {
namespace {

// "a=1,b=2" -> {a: 1, b: 2}; every value a positive integer.
std::map<std::string, int64_t> parse_params(const std::string& policy, const std::string& text) {
  std::map<std::string, int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const auto value = eq == std::string::npos
                           ? std::nullopt
                           : core::parse_nonnegative_int(item.substr(eq + 1), int64_t{1} << 40);
    if (key.empty() || !value) {
      throw UsageError("--kv_cache=" + policy + ": '" + item + "' is not NAME=INTEGER");
    }
    out[key] = *value;
  }
  return out;
}

int64_t take(std::map<std::string, int64_t>& params, const std::string& policy,
             const std::string& key, int64_t fallback, int64_t min) {
  auto it = params.find(key);
  const int64_t v = it == params.end() ? fallback : it->second;
  if (it != params.end()) params.erase(it);
  if (v < min) {
    throw UsageError("--kv_cache=" + policy + ": " + key + "=" + std::to_string(v) +
                     " must be at least " + std::to_string(min));
  }
  return v;
}

void reject_leftovers(const std::map<std::string, int64_t>& params, const std::string& policy,
                      const std::string& allowed) {
  if (params.empty()) return;
  throw UsageError("--kv_cache=" + policy + ": unknown parameter '" + params.begin()->first +
                   "' (" + allowed + ")");
}

}  // namespace

KvPolicy parse_kv_policy(const std::string& text) {
  KvPolicy p;
  p.text = text;
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  auto params = parse_params(text, colon == std::string::npos ? "" : text.substr(colon + 1));
  if (name == "full") {
    reject_leftovers(params, text, "full takes none");
  } else if (name == "int8" || name == "int4") {
    p.kind = KvPolicy::Kind::kQuantized;
    p.quant.bits = name == "int8" ? 8 : 4;
    p.quant.group = take(params, text, "group", 32, 2);
    p.quant.residual = take(params, text, "residual", 32, 0);
    reject_leftovers(params, text, "int8/int4 take group and residual");
  } else if (name == "streaming") {
    p.kind = KvPolicy::Kind::kStreaming;
    p.sinks = take(params, text, "sinks", 4, 0);
    p.window = take(params, text, "window", 0, 1);
    if (!params.count("window") && p.window == 0) {
      throw UsageError("--kv_cache=" + text + ": streaming needs window=W (and sinks=S)");
    }
    reject_leftovers(params, text, "streaming takes sinks and window");
  } else if (name == "h2o") {
    p.kind = KvPolicy::Kind::kH2o;
    if (!params.count("budget")) throw UsageError("--kv_cache=" + text + ": h2o needs budget=B");
    p.budget = take(params, text, "budget", 0, 2);
    p.recent = take(params, text, "recent", p.budget / 2, 1);
    if (p.recent >= p.budget) {
      throw UsageError("--kv_cache=" + text + ": recent=" + std::to_string(p.recent) +
                       " must be below budget=" + std::to_string(p.budget));
    }
    reject_leftovers(params, text, "h2o takes budget and recent");
  } else {
    throw UsageError("--kv_cache=" + text + ": unknown policy '" + name +
                     "' (full, int8, int4, streaming:sinks=S,window=W)");
  }
  return p;
}

std::unique_ptr<model::KvCache> make_kv_cache(const KvPolicy& policy, const model::GptImpl& model,
                                              int64_t batch, int64_t max_len) {
  const auto& c = model.config();
  switch (policy.kind) {
    case KvPolicy::Kind::kFull:
      return model.make_cache(batch, max_len);
    case KvPolicy::Kind::kQuantized:
      return std::make_unique<QuantizedKvCache>(c.n_layer, std::min(max_len, c.block_size),
                                                model.rope_spec(), policy.quant);
    case KvPolicy::Kind::kStreaming:
      if (policy.sinks + policy.window >= c.block_size) {
        throw UsageError("--kv_cache=" + policy.text +
                         ": sinks + window = " + std::to_string(policy.sinks + policy.window) +
                         " must be below the model's block_size " + std::to_string(c.block_size));
      }
      return std::make_unique<StreamingKvCache>(c.n_layer, policy.sinks, policy.window,
                                                model.rope_spec());
    case KvPolicy::Kind::kH2o:
      return std::make_unique<H2oKvCache>(c.n_layer, std::min(max_len, c.block_size), policy.budget,
                                          policy.recent, model.rope_spec());
  }
  return nullptr;
}

}  // namespace lmtrain::infer
