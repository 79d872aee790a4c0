#include "cli/teacher_run.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "data/prepared_data.h"
#include "options/read_model.h"

namespace lmtrain::cli {

core::Config teacher_training_config(const core::Config& student, const model::GptConfig& mcfg) {
  core::Config t = student;
  const int64_t width = student.get_int("distill.teacher_hidden_size") > 0
                            ? student.get_int("distill.teacher_hidden_size")
                            : 2 * mcfg.n_embd;
  const int64_t head_dim = mcfg.head_dim();
  if (width % head_dim != 0) {
    throw UsageError(log::format(
        "config key 'distill.teacher_hidden_size' = %lld must be a multiple of the student's "
        "head width %lld (the teacher keeps it and gets %lld / %lld heads)",
        (long long)width, (long long)head_dim, (long long)width, (long long)head_dim));
  }
  const int64_t heads = width / head_dim;
  const std::string why = "distill.teacher_hidden_size";
  // The student's resolved shape at the teacher's width (a nanochat depth becomes explicit).
  t.set("model.depth", "0", why);
  t.set("model.n_layer", std::to_string(mcfg.n_layer), why);
  t.set("model.n_embd", std::to_string(width), why);
  t.set("model.n_head", std::to_string(heads), why);
  t.set("model.head_dim", std::to_string(mcfg.head_dim_ > 0 ? head_dim : 0), why);
  if (mcfg.n_kv_head > 0) {
    // Keep the grouped-query ratio.
    t.set("model.n_kv_head",
          std::to_string(std::max<int64_t>(1, heads * mcfg.n_kv_head / mcfg.n_head)), why);
  }
  if (mcfg.mlp_hidden > 0) {
    t.set("model.mlp_hidden", std::to_string(mcfg.mlp_hidden * width / mcfg.n_embd), why);
  }
  t.set("model.init_from", "", why);
  const std::string run_dir = student.get_string("run.dir");
  t.set("run.dir", run_dir + "/teacher", why);
  t.set("distill.enabled", "false", why);
  t.set("distill.teacher", "", why);
  // An ordinary run dir: a rerun resumes it, or finds it complete and trains nothing.
  t.set("checkpoint.resume", "auto", why);
  t.set("train.stop_at_step", "0", why);
  if (const int64_t steps = student.get_int("distill.teacher_steps"); steps > 0) {
    t.set("train.max_steps", std::to_string(steps), "distill.teacher_steps");
  }
  return t;
}

std::optional<core::Config> teacher_training_run(const core::Config& cfg) {
  if (!cfg.get_bool("distill.enabled") || !cfg.get_string("distill.cache").empty() ||
      !cfg.get_string("distill.teacher").empty()) {
    return std::nullopt;
  }
  const auto tokenizer = data::BpeTokenizer::load_hf(
      data::require_data_file(cfg.get_string("data.dir"), "tokenizer.json"));
  const auto mcfg = options::read_gpt_config(cfg, static_cast<int64_t>(tokenizer.vocab_size()));
  core::Config tcfg = teacher_training_config(cfg, mcfg);
  log::info(log::format(
      "distillation: the teacher is trained first (n_embd %lld, %lld steps; resumed or reused "
      "when already there) in %s",
      (long long)tcfg.get_int("model.n_embd"), (long long)tcfg.get_int("train.max_steps"),
      tcfg.get_string("run.dir").c_str()));
  return tcfg;
}

}  // namespace lmtrain::cli
