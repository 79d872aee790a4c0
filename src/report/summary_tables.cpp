#include "report/summary_tables.h"

#include <cmath>
#include <set>

#include "core/log.h"
#include "observe/metrics_logger.h"
#include "report/xml_text.h"

namespace lmtrain::report {
namespace {

const Series* find_series(const RunData& run, const std::string& name) {
  const auto it = run.metrics.scalars.find(name);
  return it == run.metrics.scalars.end() || it->second.empty() ? nullptr : &it->second;
}

std::string or_unknown(const std::string& s) { return s.empty() ? "?" : s; }

}  // namespace

RunFigures run_figures(const RunData& run) {
  RunFigures f;
  if (const Series* loss = find_series(run, "loss")) {
    f.last_step = static_cast<int64_t>(loss->step.back());
  }
  if (const Series* val = find_series(run, "val_loss")) {
    size_t best = 0;
    for (size_t i = 1; i < val->size(); ++i) {
      if (val->value[i] < val->value[best]) best = i;
    }
    f.best_val_loss = val->value[best];
    f.best_val_step = static_cast<int64_t>(val->step[best]);
    f.has_val = true;
    const Series* ppl = find_series(run, "val_ppl");
    f.final_val_ppl = ppl ? ppl->value.back() : std::exp(val->value.back());
    f.last_step = std::max(f.last_step, static_cast<int64_t>(val->step.back()));
  }
  if (const Series* tps = find_series(run, "tokens_per_s")) {
    double sum = 0;
    for (double v : tps->value) sum += v;
    f.mean_tokens_per_s = sum / static_cast<double>(tps->size());
  }
  return f;
}

Table summary_table(const std::vector<RunData>& runs) {
  Table t;
  t.header.push_back("");
  for (const auto& r : runs) t.header.push_back(r.name);
  auto row = [&](const std::string& label, auto&& cell) {
    std::vector<std::string> cells{label};
    for (const auto& r : runs) cells.push_back(cell(r));
    t.rows.push_back(std::move(cells));
  };
  row("run dir", [](const RunData& r) { return r.dir; });
  row("state", [](const RunData& r) {
    std::string s = run_status_name(r.status);
    if (!r.status_detail.empty()) s += " (" + r.status_detail + ")";
    return s;
  });
  row("model", [](const RunData& r) { return or_unknown(r.model); });
  row("parameters", [](const RunData& r) {
    return r.parameters > 0 ? format_thousands(r.parameters) + " (" +
                                  format_count(static_cast<double>(r.parameters)) + ")"
                            : std::string("?");
  });
  row("world size",
      [](const RunData& r) { return r.world_size > 0 ? std::to_string(r.world_size) : "?"; });
  row("precision", [](const RunData& r) { return or_unknown(r.precision); });
  row("device", [](const RunData& r) { return or_unknown(r.device); });
  row("steps", [](const RunData& r) {
    const auto f = run_figures(r);
    if (f.last_step < 0) return std::string("none logged");
    return std::to_string(f.last_step) +
           (r.max_steps > 0 ? " of " + std::to_string(r.max_steps) : std::string());
  });
  row("tokens seen", [](const RunData& r) {
    const auto f = run_figures(r);
    if (f.last_step < 0 || r.tokens_per_step <= 0) return std::string("?");
    const double tokens = static_cast<double>(f.last_step) * static_cast<double>(r.tokens_per_step);
    return format_count(tokens) + " (" + format_thousands(r.tokens_per_step) + " per step)";
  });
  row("training time", [](const RunData& r) {
    if (r.metrics.sessions == 0) return std::string("?");
    const double t = r.metrics.train_seconds;
    std::string s = t < 10 ? log::format("%.1fs", t) : train::format_duration(t);
    if (r.metrics.sessions > 1) s += " over " + std::to_string(r.metrics.sessions) + " sessions";
    return s;
  });
  row("best val loss", [](const RunData& r) {
    const auto f = run_figures(r);
    if (f.best_val_step < 0) return std::string("none");
    return log::format("%.4f at step %lld", f.best_val_loss, (long long)f.best_val_step);
  });
  row("final val perplexity", [](const RunData& r) {
    const auto f = run_figures(r);
    return f.has_val ? log::format("%.2f", f.final_val_ppl) : std::string("none");
  });
  row("mean tokens/s", [](const RunData& r) {
    const auto f = run_figures(r);
    return f.mean_tokens_per_s > 0 ? format_thousands(std::llround(f.mean_tokens_per_s))
                                   : std::string("?");
  });
  row("checkpoints", [](const RunData& r) {
    if (r.checkpoints.empty()) return std::string("none");
    std::string s;
    for (const auto& c : r.checkpoints) {
      if (!s.empty()) s += ", ";
      s += c.name;
      std::string tags;
      if (c.latest) tags += "latest";
      if (c.best) tags += std::string(tags.empty() ? "" : ", ") + "best";
      if (!tags.empty()) s += " (" + tags + ")";
    }
    return s;
  });
  return t;
}

std::vector<std::string> config_diff_keys(const std::vector<RunData>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs) {
    for (const auto& [k, v] : r.config) keys.insert(k);
  }
  std::vector<std::string> out;
  if (runs.size() < 2) return out;
  for (const auto& k : keys) {
    if (k == "run.dir") continue;
    std::set<std::string> values;
    bool missing = false;
    for (const auto& r : runs) {
      const auto it = r.config.find(k);
      if (it == r.config.end()) {
        missing = true;
      } else {
        values.insert(it->second);
      }
    }
    if (missing || values.size() > 1) out.push_back(k);
  }
  return out;
}

Table config_diff_table(const std::vector<RunData>& runs) {
  Table t;
  t.header.push_back("key");
  for (const auto& r : runs) t.header.push_back(r.name);
  for (const auto& k : config_diff_keys(runs)) {
    std::vector<std::string> cells{k};
    for (const auto& r : runs) {
      const auto it = r.config.find(k);
      cells.push_back(it == r.config.end() ? "(absent)" : it->second);
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

}  // namespace lmtrain::report
