// One source of truth for defaults: every option struct starts its members at their keys'
// schema defaults (core/config_schema.h), and the readers of a config left at its defaults give
// exactly the default-made structs. A reader that reads another key than its member's, a struct
// member named after a key the schema lacks, or an enum whose default drifted from its key's
// fails here.
#include <gtest/gtest.h>

#include "cli/read_options.h"
#include "core/config.h"
#include "core/error.h"
#include "options/read_model.h"

namespace lmtrain::options {
namespace {

// Field by field: EXPECT_SAME(read, made, field).
#define EXPECT_SAME(a, b, f) EXPECT_EQ((a).f, (b).f) << #f

TEST(SchemaDefaults, ModelReadersGiveTheDefaultMadeStructs) {
  const auto cfg = core::Config::defaults();
  const auto g = read_gpt_config(cfg, kTokenizerLater);
  const model::GptConfig d;
  EXPECT_SAME(g, d, n_layer);
  EXPECT_SAME(g, d, n_head);
  EXPECT_SAME(g, d, n_embd);
  EXPECT_SAME(g, d, vocab_size);
  EXPECT_SAME(g, d, block_size);
  EXPECT_SAME(g, d, mlp_hidden);
  EXPECT_SAME(g, d, n_kv_head);
  EXPECT_SAME(g, d, head_dim_);
  EXPECT_SAME(g, d, dropout);
  EXPECT_SAME(g, d, bias);
  EXPECT_SAME(g, d, tie_embeddings);
  EXPECT_SAME(g, d, init_std);
  EXPECT_SAME(g, d, arch);
  EXPECT_SAME(g, d, norm);
  EXPECT_SAME(g, d, norm_eps);
  EXPECT_SAME(g, d, pos);
  EXPECT_SAME(g, d, rope_theta);
  EXPECT_SAME(g, d, mlp);
  EXPECT_SAME(g, d, qk_norm);
  EXPECT_SAME(g, d, qkv_bias);
  EXPECT_SAME(g, d, logit_softcap);
  EXPECT_TRUE(g.rope_scaling == d.rope_scaling);
  EXPECT_SAME(g, d, rope_scaling.factor);
  EXPECT_SAME(g, d, rope_scaling.beta_fast);
  EXPECT_SAME(g, d, rope_scaling.high_freq_factor);
  EXPECT_SAME(g, d, windows);

  // dense_hidden 0 keeps expert_hidden as read.
  const auto m = read_moe_config(cfg, d.n_layer, /*dense_hidden=*/0);
  const model::MoeConfig dm;
  EXPECT_SAME(m, dm, num_experts);
  EXPECT_SAME(m, dm, top_k);
  EXPECT_SAME(m, dm, expert_hidden);
  EXPECT_SAME(m, dm, shared_experts);
  EXPECT_SAME(m, dm, every);
  EXPECT_SAME(m, dm, dense_layers);
  EXPECT_SAME(m, dm, gate);
  EXPECT_SAME(m, dm, renormalize);
  EXPECT_SAME(m, dm, capacity_factor);
  EXPECT_SAME(m, dm, aux_loss_coef);
  EXPECT_SAME(m, dm, z_loss_coef);
  EXPECT_SAME(m, dm, bias_update_rate);

  const auto l = read_lora_options(cfg);
  const model::LoraOptions dl;
  EXPECT_SAME(l, dl, rank);
  EXPECT_SAME(l, dl, alpha);
  EXPECT_SAME(l, dl, dropout);
  EXPECT_SAME(l, dl, decay);
  EXPECT_SAME(l, dl, targets);
  EXPECT_SAME(l, dl, unfreeze_norms);
  EXPECT_SAME(l, dl, unfreeze_embeddings);
  EXPECT_SAME(l, dl, unfreeze_head);

  const auto t = read_temporal_encoder(cfg);
  const model::temporal::TemporalEncoderOptions dt;
  EXPECT_SAME(t, dt, channels);
  EXPECT_SAME(t, dt, max_length);
  EXPECT_SAME(t, dt, patch_len);
  EXPECT_SAME(t, dt, stride);
  EXPECT_SAME(t, dt, layers);
  EXPECT_SAME(t, dt, width);
  EXPECT_SAME(t, dt, heads);
  EXPECT_SAME(t, dt, mlp_ratio);
  EXPECT_SAME(t, dt, num_tokens);
  EXPECT_SAME(t, dt, projector);
}

TEST(SchemaDefaults, RunReadersGiveTheDefaultMadeStructs) {
  const auto cfg = core::Config::defaults();
  const auto rt = core::Runtime::cpu();
  const auto r = cli::read_run_options(cfg, 1, rt);
  const train::RunOptions d;
  const auto& o = r.optimizer;
  const auto& od = d.optimizer;
  EXPECT_SAME(o, od, name);
  EXPECT_SAME(o, od, zero);
  EXPECT_SAME(o, od, lr);
  EXPECT_SAME(o, od, adamw.beta1);
  EXPECT_SAME(o, od, adamw.beta2);
  EXPECT_SAME(o, od, adamw.eps);
  EXPECT_SAME(o, od, adamw.weight_decay);
  EXPECT_SAME(o, od, muon.lr);
  EXPECT_SAME(o, od, muon.momentum);
  EXPECT_SAME(o, od, muon.momentum_start);
  EXPECT_SAME(o, od, muon.momentum_warmup);
  EXPECT_SAME(o, od, muon.embedding_lr);
  EXPECT_SAME(o, od, muon.head_lr);
  EXPECT_SAME(r, d, schedule.kind);
  EXPECT_SAME(r, d, schedule.peak);
  EXPECT_SAME(r, d, schedule.min_ratio);
  EXPECT_SAME(r, d, schedule.warmup_steps);
  EXPECT_SAME(r, d, schedule.decay_fraction);
  EXPECT_SAME(r, d, seed);
  EXPECT_SAME(r, d, threads);
  EXPECT_SAME(r, d, workers);
  EXPECT_SAME(r, d, grad_clip);
  EXPECT_SAME(r, d, bucket_mb);
  EXPECT_SAME(r, d, cuda_graphs.choice);
  EXPECT_SAME(r, d, cuda_graphs.enabled);
  EXPECT_SAME(r, d, cuda_graphs.warmup);
  EXPECT_SAME(r, d, run_dir);
  EXPECT_SAME(r, d, init_from);
  EXPECT_SAME(r, d, loss_scale);
  EXPECT_SAME(r, d, loss_scale_window);
  EXPECT_SAME(r, d, collective_timeout_s);
  EXPECT_SAME(r, d, loop.log_every);
  EXPECT_SAME(r, d, loop.tensorboard);
  EXPECT_SAME(r, d, loop.eval_every);
  EXPECT_SAME(r, d, loop.eval_batches);
  EXPECT_SAME(r, d, loop.checkpoint_every);
  EXPECT_SAME(r, d, loop.checkpoint_every_epoch);
  EXPECT_SAME(r, d, loop.keep_last);
  EXPECT_SAME(r, d, loop.stop_at_step);
  EXPECT_SAME(r, d, loop.report);

  const auto s = cli::read_setup_options(cfg);
  const train::SetupOptions ds;
  EXPECT_SAME(s, ds, temporal);
  EXPECT_SAME(s, ds, max_steps);
  EXPECT_SAME(s, ds, epochs);
  EXPECT_SAME(s, ds, ep);
  EXPECT_SAME(s, ds, data.source);
  EXPECT_SAME(s, ds, data.dir);
  EXPECT_SAME(s, ds, data.seq_len);
  EXPECT_SAME(s, ds, data.shuffle);
  EXPECT_SAME(s, ds, data.chat_pack);
  EXPECT_SAME(s, ds, data.document_mask);
  EXPECT_SAME(s, ds, data.stream.inputs);
  EXPECT_SAME(s, ds, data.stream.tokenizer);
  EXPECT_SAME(s, ds, data.stream.text_column);
  EXPECT_SAME(s, ds, data.stream.doc_separator);
  EXPECT_SAME(s, ds, data.stream.val_fraction);
  EXPECT_SAME(s, ds, data.stream.block_mb);
  EXPECT_SAME(s, ds, data.stream.queue_batches);
  EXPECT_SAME(s, ds, data.stream.tokenizer_threads);
  EXPECT_SAME(s, ds, data.temporal.dir);
  EXPECT_SAME(s, ds, data.temporal.online);
  EXPECT_SAME(s, ds, data.temporal.num_samples);
  EXPECT_SAME(s, ds, data.temporal.seed);
  EXPECT_SAME(s, ds, data.temporal.lengths);
  EXPECT_SAME(s, ds, data.temporal.tasks);
  EXPECT_SAME(s, ds, data.temporal.val_fraction);
  EXPECT_SAME(s, ds, distill.enabled);
  EXPECT_SAME(s, ds, distill.teacher);
  EXPECT_SAME(s, ds, distill.cache);
  EXPECT_SAME(s, ds, distill.temperature);
  EXPECT_SAME(s, ds, distill.alpha);
  EXPECT_SAME(s, ds, distill.chunk_tokens);
  EXPECT_SAME(s, ds, distill.teacher_dtype);
  EXPECT_SAME(s, ds, distill.top_k);
  EXPECT_SAME(s, ds, distill.feature_layers);
  EXPECT_SAME(s, ds, distill.feature_weight);
  EXPECT_SAME(s, ds, distill.expert_weight);

  const auto b = cli::read_bench_options(cfg, 1, rt);
  const train::BenchOptions db;
  EXPECT_SAME(b, db, warmup);
  EXPECT_SAME(b, db, steps);
  EXPECT_SAME(b, db, peak_tflops);
}

TEST(SchemaDefaults, AKeyTheSchemaLacksIsAnError) {
  EXPECT_THROW(core::default_int("model.no_such_key"), Error);
  EXPECT_THROW(core::default_float("model.n_layer"), Error);  // an integer key
  EXPECT_EQ(core::default_int("model.n_layer"), core::Config::defaults().get_int("model.n_layer"));
  EXPECT_EQ(core::default_string("lora.targets"), "q,v");
}

#undef EXPECT_SAME

}  // namespace
}  // namespace lmtrain::options
