#include "infer/kv_cache_policy.h"

#include <map>
#include <vector>

#include "core/error.h"
#include "core/parse_int.h"
#include "core/text_list.h"
#include "infer/h2o_kv_cache.h"
#include "infer/quantized_kv_cache.h"
#include "infer/streaming_kv_cache.h"

namespace lmtrain::infer {
namespace {

// "a=1,b=2" -> {a: 1, b: 2}; every value a positive integer.
std::map<std::string, int64_t> parse_params(const std::string& policy, const std::string& text) {
  std::map<std::string, int64_t> out;
  for (const auto& item : core::split_list(text)) {
    if (item.empty()) continue;  // "a=1," as "a=1"
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const auto value = eq == std::string::npos
                           ? std::nullopt
                           : core::parse_nonnegative_int(item.substr(eq + 1), int64_t{1} << 40);
    if (key.empty() || !value) {
      throw UsageError("--kv_cache=" + policy + ": '" + item + "' is not NAME=INTEGER");
    }
    if (!out.emplace(key, *value).second) {
      throw UsageError("--kv_cache=" + policy + ": '" + key + "' is given twice (" + key + "=" +
                       std::to_string(out[key]) + " and " + item + "): give it once");
    }
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

// One part of a policy text (NAME[:PARAMS]) into p; `text` is the whole text, for messages.
void parse_part(const std::string& part, const std::string& text, KvPolicy& p) {
  const auto colon = part.find(':');
  const std::string name = part.substr(0, colon);
  auto params = parse_params(text, colon == std::string::npos ? "" : part.substr(colon + 1));
  if (auto it = params.find("window_bound"); it != params.end()) {  // any part takes it
    if (it->second > 1) {
      throw UsageError("--kv_cache=" + text + ": window_bound=" + std::to_string(it->second) +
                       " must be 0 or 1");
    }
    p.window_bound = it->second == 1;
    params.erase(it);
  }
  if (name == "full") {
    reject_leftovers(params, text, "full takes only window_bound");
  } else if (name == "int8" || name == "int4") {
    QuantizedKvOptions q;
    q.bits = name == "int8" ? 8 : 4;
    q.group = take(params, text, "group", 32, 2);
    q.residual = take(params, text, "residual", 32, 0);
    reject_leftovers(params, text, "int8/int4 take group and residual");
    p.quant = q;
  } else if (name == "streaming") {
    p.select = KvPolicy::Select::kStreaming;
    if (!params.count("window")) {
      throw UsageError("--kv_cache=" + text + ": streaming needs window=W (and sinks=S)");
    }
    p.sinks = take(params, text, "sinks", 4, 0);
    p.window = take(params, text, "window", 0, 1);
    reject_leftovers(params, text, "streaming takes sinks and window");
  } else if (name == "h2o") {
    p.select = KvPolicy::Select::kH2o;
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
                     "' (full, int8, int4, streaming:sinks=S,window=W, h2o:budget=B,recent=R, "
                     "or SELECTION+STORAGE such as streaming:sinks=4,window=252+int8)");
  }
}

// "selection" (streaming, h2o), "storage" (int8, int4) or "full": what a part decides.
std::string role(const std::string& name) {
  if (name == "streaming" || name == "h2o") return "selection";
  if (name == "int8" || name == "int4") return "storage";
  return name;
}

std::unique_ptr<model::KvCache> make_policy_cache(const KvPolicy& policy,
                                                  const model::GptImpl& model, int64_t batch,
                                                  int64_t max_len) {
  const auto& c = model.config();
  if (policy.quant) check_quantized_fits(*policy.quant, c.head_dim(), "--kv_cache=" + policy.text);
  switch (policy.select) {
    case KvPolicy::Select::kAll:
      if (!policy.quant) return model.make_cache(batch, max_len);
      return std::make_unique<QuantizedKvCache>(c.n_layer, std::min(max_len, c.block_size),
                                                model.rope_spec(), *policy.quant);
    case KvPolicy::Select::kStreaming: {
      if (policy.sinks + policy.window >= c.block_size) {
        throw UsageError("--kv_cache=" + policy.text +
                         ": sinks + window = " + std::to_string(policy.sinks + policy.window) +
                         " must be below the model's block_size " + std::to_string(c.block_size));
      }
      KvStoreFactory store;
      if (policy.quant) {
        store = [q = *policy.quant] { return std::make_unique<QuantizedKvStore>(q); };
      }
      return std::make_unique<StreamingKvCache>(c.n_layer, policy.sinks, policy.window,
                                                model.rope_spec(), store);
    }
    case KvPolicy::Select::kH2o:
      return std::make_unique<H2oKvCache>(c.n_layer, std::min(max_len, c.block_size), policy.budget,
                                          policy.recent, model.rope_spec());
  }
  return nullptr;
}

}  // namespace

KvPolicy parse_kv_policy(const std::string& text) {
  KvPolicy p;
  p.text = text;
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t plus = text.find('+', begin);
    parts.push_back(text.substr(begin, plus == std::string::npos ? plus : plus - begin));
    if (plus == std::string::npos) break;
    begin = plus + 1;
  }
  if (parts.size() > 2) {
    throw UsageError(
        "--kv_cache=" + text +
        ": at most two parts, SELECTION+STORAGE (e.g. streaming:sinks=4,window=252+int8)");
  }
  std::string seen;  // the first part's name
  for (const auto& part : parts) {
    const std::string name = part.substr(0, part.find(':'));
    if (name.empty()) throw UsageError("--kv_cache=" + text + ": empty policy name");
    if (parts.size() == 2 && name == "full") {
      throw UsageError("--kv_cache=" + text +
                       ": full is the exact cache and composes with nothing");
    }
    if (!seen.empty() && (name == seen || role(name) == role(seen))) {
      throw UsageError("--kv_cache=" + text + ": '" + seen + "' and '" + name + "' are both " +
                       (name == seen ? "the same part" : "a " + role(name)) +
                       ": compose one selection (streaming, h2o) with one storage (int8, int4)");
    }
    parse_part(part, text, p);
    seen = name;
  }
  if (p.select == KvPolicy::Select::kH2o && p.quant) {
    throw UsageError("--kv_cache=" + text +
                     ": h2o does not compose with int8/int4: it keeps a different set of tokens "
                     "per head, which would split KIVI's per-channel key groups unevenly");
  }
  return p;
}

std::unique_ptr<model::KvCache> make_kv_cache(const KvPolicy& policy, const model::GptImpl& model,
                                              int64_t batch, int64_t max_len) {
  auto cache = make_policy_cache(policy, model, batch, max_len);
  cache->bound_to_windows(policy.window_bound ? model.config().layer_windows()
                                              : std::vector<int64_t>{});
  return cache;
}

}  // namespace lmtrain::infer
