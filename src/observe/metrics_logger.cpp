#include "observe/metrics_logger.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "observe/tfevents_writer.h"

namespace lmtrain::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600)
    return log::format("%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  if (s >= 60) return log::format("%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return log::format("%llds", (long long)s);
}

namespace {

// A run killed while writing a record leaves its line cut off; appending the resumed run's
// records to it would glue two records into one damaged line in the middle of the file. The
// fragment is cut away (with a warning) so the file stays one JSON object per line.
void drop_incomplete_last_line(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  // Read backwards in blocks to the last newline; a metrics line is short.
  uint64_t end = size, cut = 0;
  bool found = false, ends_with_newline = false;
  std::string block;
  while (end > 0 && !found) {
    const uint64_t begin = end > 4096 ? end - 4096 : 0;
    block.resize(end - begin);
    in.seekg(static_cast<std::streamoff>(begin));
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (!in) return;
    if (end == size) ends_with_newline = block.back() == '\n';
    if (ends_with_newline) return;
    const auto nl = block.rfind('\n');
    if (nl != std::string::npos) {
      cut = begin + nl + 1;
      found = true;
    }
    end = begin;
  }
  in.close();
  std::filesystem::resize_file(path, cut, ec);
  if (ec) throw Error("cannot cut the incomplete last line off " + path + ": " + ec.message());
  log::warn(
      log::format("%s: cut off its incomplete last line (%llu bytes) left by a run that was "
                  "killed while writing it",
                  path.c_str(), (unsigned long long)(size - cut)));
}

}  // namespace

MetricsLogger::MetricsLogger(const std::string& run_dir, bool enabled, bool tensorboard,
                             int64_t max_steps)
    : enabled_(enabled), max_steps_(max_steps) {
  if (!enabled_) return;
  const std::string path = run_dir + "/metrics.jsonl";
  drop_incomplete_last_line(path);
  jsonl_.open(path, std::ios::app);
  if (!jsonl_) throw Error("cannot open " + path + " for writing");
  if (tensorboard) tb_ = std::make_unique<TfEventsWriter>(run_dir);
}

MetricsLogger::~MetricsLogger() = default;

void MetricsLogger::log_step(const StepMetrics& m) {
  if (!enabled_) return;
  nlohmann::json j = {{"step", m.step},           {"epoch", m.epoch},
                      {"loss", m.loss},           {"lr", m.lr},
                      {"grad_norm", m.grad_norm}, {"tokens_per_s", m.tokens_per_s},
                      {"elapsed_s", m.elapsed_s}};
  for (const auto& [name, value] : m.terms) j[name + "_loss"] = value;
  if (m.samples_per_s > 0) j["samples_per_s"] = m.samples_per_s;
  if (m.comm_wait_ms >= 0) j["comm_wait_ms"] = m.comm_wait_ms;
  if (m.data_wait_ms >= 0) j["data_wait_ms"] = m.data_wait_ms;
  if (m.a2a_ms >= 0) j["a2a_ms"] = m.a2a_ms;
  if (m.comm_bytes) {
    const auto& c = *m.comm_bytes;
    j["comm_bytes"] = {{"all_reduce", c.all_reduce},         {"all_gather", c.all_gather},
                       {"reduce_scatter", c.reduce_scatter}, {"broadcast", c.broadcast},
                       {"all_to_all", c.all_to_all},         {"total", c.total()}};
  }
  if (m.loss_scale > 0) {
    j["loss_scale"] = m.loss_scale;
    j["skipped_steps"] = m.skipped_steps;
  }
  if (m.peak_mem_bytes > 0) j["peak_mem_mib"] = m.peak_mem_bytes / 1048576.0;
  // MoE: per layer, and the worst layer's balance on the progress line.
  double worst_cv = 0, worst_max = 0, mean_drop = 0, mean_aux = 0;
  if (!m.moe.empty()) {
    auto layers = nlohmann::json::array();
    for (const auto& l : m.moe) {
      layers.push_back({{"layer", l.layer},
                        {"load_min", l.load_min},
                        {"load_max", l.load_max},
                        {"load_cv", l.load_cv},
                        {"dropped", l.dropped},
                        {"aux_loss", l.aux},
                        {"z_loss", l.z}});
      worst_cv = std::max(worst_cv, l.load_cv);
      worst_max = std::max(worst_max, l.load_max);
      mean_drop += l.dropped / static_cast<double>(m.moe.size());
      mean_aux += l.aux / static_cast<double>(m.moe.size());
    }
    j["moe"] = layers;
  }
  jsonl_ << j.dump() << '\n';
  jsonl_.flush();
  if (tb_) {
    tb_->add_scalar("train/loss", m.loss, m.step);
    for (const auto& [name, value] : m.terms)
      tb_->add_scalar("train/" + name + "_loss", value, m.step);
    tb_->add_scalar("train/lr", m.lr, m.step);
    tb_->add_scalar("train/grad_norm", m.grad_norm, m.step);
    tb_->add_scalar("train/tokens_per_s", m.tokens_per_s, m.step);
    if (m.samples_per_s > 0) tb_->add_scalar("train/samples_per_s", m.samples_per_s, m.step);
    if (m.comm_wait_ms >= 0) tb_->add_scalar("train/comm_wait_ms", m.comm_wait_ms, m.step);
    if (m.data_wait_ms >= 0) tb_->add_scalar("train/data_wait_ms", m.data_wait_ms, m.step);
    if (m.a2a_ms >= 0) tb_->add_scalar("train/a2a_ms", m.a2a_ms, m.step);
    if (m.comm_bytes) tb_->add_scalar("train/comm_mb", m.comm_bytes->total() / 1e6, m.step);
    if (m.loss_scale > 0) {
      tb_->add_scalar("train/loss_scale", m.loss_scale, m.step);
      tb_->add_scalar("train/skipped_steps", static_cast<double>(m.skipped_steps), m.step);
    }
    if (m.peak_mem_bytes > 0) {
      tb_->add_scalar("train/peak_mem_mib", m.peak_mem_bytes / 1048576.0, m.step);
    }
    for (const auto& l : m.moe) {
      const std::string tag = "moe/layer" + std::to_string(l.layer) + "/";
      tb_->add_scalar(tag + "load_min", l.load_min, m.step);
      tb_->add_scalar(tag + "load_max", l.load_max, m.step);
      tb_->add_scalar(tag + "load_cv", l.load_cv, m.step);
      tb_->add_scalar(tag + "dropped", l.dropped, m.step);
      tb_->add_scalar(tag + "aux_loss", l.aux, m.step);
      tb_->add_scalar(tag + "z_loss", l.z, m.step);
    }
  }
  const double per_step = m.step > 0 ? m.elapsed_s / m.step : 0;
  const double eta = per_step * static_cast<double>(max_steps_ - m.step);
  std::string terms;
  // Four decimals, or four significant digits for a small term (an MoE-output MSE is ~1e-5).
  for (const auto& [name, value] : m.terms) {
    const char* fmt = value != 0 && std::fabs(value) < 0.01 ? " %s %.4g" : " %s %.4f";
    terms += log::format(fmt, name.c_str(), value);
  }
  if (!terms.empty()) terms = " (" + terms.substr(1) + ")";
  std::string extra;
  if (m.samples_per_s > 0) extra += log::format(" | %.1f samples/s", m.samples_per_s);
  if (m.comm_wait_ms >= 0) extra += log::format(" | comm wait %.1f ms", m.comm_wait_ms);
  if (m.data_wait_ms >= 0) extra += log::format(" | data wait %.1f ms", m.data_wait_ms);
  if (m.a2a_ms >= 0) extra += log::format(" | all-to-all %.1f ms", m.a2a_ms);
  if (m.comm_bytes) extra += " | sent " + m.comm_bytes->describe();
  if (m.loss_scale > 0) {
    extra += log::format(" | scale %.6g, %lld skipped", m.loss_scale, (long long)m.skipped_steps);
  }
  if (m.peak_mem_bytes > 0)
    extra += log::format(" | peak mem %.0f MiB", m.peak_mem_bytes / 1048576.0);
  if (!m.moe.empty()) {
    extra += log::format(" | moe load cv %.2f, max share %.2f, dropped %.1f%%, aux %.3f", worst_cv,
                         worst_max, 100 * mean_drop, mean_aux);
  }
  log::info(
      log::format("step %6lld/%lld | loss %.4f%s | lr %.2e | gnorm %.3f | %.0f tok/s%s | "
                  "elapsed %s | ETA %s",
                  (long long)m.step, (long long)max_steps_, m.loss, terms.c_str(), m.lr,
                  m.grad_norm, m.tokens_per_s, extra.c_str(), format_duration(m.elapsed_s).c_str(),
                  format_duration(eta).c_str()));
}

void MetricsLogger::log_eval(int64_t step, double val_loss) {
  if (!enabled_) return;
  nlohmann::json j = {{"step", step}, {"val_loss", val_loss}, {"val_ppl", std::exp(val_loss)}};
  jsonl_ << j.dump() << '\n';
  jsonl_.flush();
  if (tb_) {
    tb_->add_scalar("val/loss", val_loss, step);
    tb_->add_scalar("val/ppl", std::exp(val_loss), step);
  }
  log::info(log::format("step %6lld | val loss %.4f | val ppl %.2f", (long long)step, val_loss,
                        std::exp(val_loss)));
}

}  // namespace lmtrain::train
