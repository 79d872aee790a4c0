// LoRA on the model (model/lora.h): frozen base, adapters only in FlatParams and the optimizer,
// exact no-op at init, merge = adapter forward, and the lora.* config errors.
#include "model/lora.h"

#include <gtest/gtest.h>

#include <map>

#include "cli/read_options.h"
#include "core/config.h"
#include "core/error.h"
#include "model/build_model.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "options/read_model.h"

namespace lmtrain::model {
namespace {

core::Config tiny_config(const std::string& arch, const std::string& targets, int64_t rank) {
  auto cfg = core::Config::defaults();
  cfg.set("model.n_layer", "2", "test");
  cfg.set("model.n_head", "2", "test");
  cfg.set("model.n_embd", "16", "test");
  cfg.set("model.vocab_size", "37", "test");
  cfg.set("model.block_size", "16", "test");
  cfg.set("data.seq_len", "16", "test");
  cfg.set("model.tie_embeddings", "false", "test");
  if (arch == "qwen3") {  // GQA, RoPE, SwiGLU, QK-norm, no biases
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"model.arch", "qwen3"},
                                                          {"model.n_kv_head", "1"},
                                                          {"model.head_dim", "8"},
                                                          {"model.mlp", "swiglu"},
                                                          {"model.mlp_hidden", "24"},
                                                          {"model.norm", "rmsnorm"},
                                                          {"model.pos", "rope"},
                                                          {"model.qk_norm", "true"},
                                                          {"model.bias", "false"}}) {
      cfg.set(k, v, "test");
    }
  }
  cfg.set("lora.rank", std::to_string(rank), "test");
  cfg.set("lora.targets", targets, "test");
  cfg.set("lora.alpha", "16", "test");
  return cfg;
}

const char* kAll = "q,k,v,o,mlp_in,mlp_out,head";

// Random values in every adapter B (they start at zero), so the adapters change the output.
void randomize_b(GptImpl& m) {
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters()) {
    const auto& name = item.key();
    if (m.param_tags().at(name).lora && name.size() > 6 &&
        name.compare(name.size() - 6, 6, "lora_B") == 0) {
      item.value().normal_(0.0, 0.05);
    }
  }
}

TEST(Lora, OffLeavesTheModelAsItWas) {
  torch::manual_seed(3);
  auto plain = build_model(options::read_model_options(tiny_config("gpt2", "q,v", 0), 0),
                           core::Runtime::cpu());
  for (const auto& [name, tag] : plain->param_tags()) {
    EXPECT_TRUE(tag.trainable) << name;
    EXPECT_FALSE(tag.lora) << name;
  }
  EXPECT_TRUE(lora_sites(*plain).empty());
}

TEST(Lora, AdaptersStartAsAnExactNoOpAndFreezeTheBase) {
  for (const std::string arch : {"gpt2", "qwen3"}) {
    torch::manual_seed(3);
    auto base = build_model(options::read_model_options(tiny_config(arch, "q", 0), 0),
                            core::Runtime::cpu());
    torch::manual_seed(3);
    auto lora = build_model(options::read_model_options(tiny_config(arch, kAll, 4), 0),
                            core::Runtime::cpu());
    // Same seed: the base draws the same weights (adapters are drawn after it).
    auto base_params = base->named_parameters();
    for (const auto& item : lora->named_parameters()) {
      const auto& name = item.key();
      const auto& p = item.value();
      const auto& tag = lora->param_tags().at(name);
      EXPECT_EQ(tag.trainable, tag.lora) << name;
      EXPECT_EQ(p.requires_grad(), tag.lora) << name;
      if (!tag.lora) {
        EXPECT_TRUE(torch::equal(p, base_params[name])) << name;
      }
    }
    // q, k, v (3) + o + mlp_in (swiglu: gate, up) + mlp_out per layer, + head.
    const size_t per_layer = arch == "qwen3" ? 7 : 6;
    EXPECT_EQ(lora_sites(*lora).size(), 2 * per_layer + 1) << arch;
    auto ids = torch::randint(37, {2, 9}, torch::kLong);
    base->eval();
    lora->eval();
    EXPECT_TRUE(torch::equal(base->forward(ids), lora->forward(ids))) << arch;
  }
}

TEST(Lora, QkvAdaptersWriteOnlyTheirRows) {
  torch::manual_seed(5);
  auto m = build_model(options::read_model_options(tiny_config("qwen3", "k", 2), 0),
                       core::Runtime::cpu());
  randomize_b(*m);
  auto& c_attn = *m->transformer->blocks[0]->attn->c_attn;
  ASSERT_EQ(c_attn.adapters.size(), 1u);
  const auto& a = c_attn.adapters[0].second;
  EXPECT_EQ(a->row_offset, 16);  // after the 2 query heads of 8
  EXPECT_EQ(a->rows, 8);         // one kv head of 8
  auto x = torch::randn({3, 16});
  auto plain = torch::linear(x, c_attn.weight, c_attn.bias);
  auto y = c_attn.forward(x);
  EXPECT_TRUE(torch::equal(y.narrow(1, 0, 16), plain.narrow(1, 0, 16)));
  EXPECT_TRUE(torch::equal(y.narrow(1, 24, 8), plain.narrow(1, 24, 8)));
  EXPECT_FALSE(torch::allclose(y.narrow(1, 16, 8), plain.narrow(1, 16, 8)));
}

TEST(Lora, TrainingTouchesOnlyAdaptersAndStateIsAdapterSized) {
  torch::manual_seed(7);
  auto cfg = tiny_config("gpt2", kAll, 4);
  auto m = build_model(options::read_model_options(cfg, 0), core::Runtime::cpu());
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : m->named_parameters()) before[item.key()] = item.value().detach().clone();
  optim::FlatParams flat(*m, m->param_tags());
  optim::AdamW opt(flat, cli::read_optimizer_options(cfg).adamw);
  // Expected flat size from the adapter shapes alone: each segment 16-aligned.
  int64_t adapter_elems = 0, padded = 0;
  for (const auto& s : lora_sites(*m)) {
    for (const auto& t : {s.adapter->lora_A, s.adapter->lora_B}) {
      adapter_elems += t.numel();
      padded += (t.numel() + 15) / 16 * 16;
    }
  }
  EXPECT_EQ(flat.num_parameters(), adapter_elems);
  EXPECT_EQ(flat.numel(), padded);
  EXPECT_EQ(opt.state_bytes(), 2 * 4 * padded);  // exp_avg + exp_avg_sq, fp32
  m->train();
  for (int step = 0; step < 3; ++step) {
    flat.zero_grad();
    auto ids = torch::randint(37, {2, 9}, torch::kLong);
    auto tgt = torch::randint(37, {2, 9}, torch::kLong);
    m->loss(ids, tgt).backward();
    opt.step(1e-2);
  }
  for (const auto& item : m->named_parameters()) {
    const auto& name = item.key();
    const auto& p = item.value();
    const auto& tag = m->param_tags().at(name);
    if (tag.trainable) {
      if (name.find("lora_B") != std::string::npos) {
        EXPECT_FALSE(torch::equal(p, before[name])) << name << " did not train";
      }
    } else {
      EXPECT_TRUE(torch::equal(p, before[name])) << name << " (frozen) changed";
      EXPECT_FALSE(p.grad().defined()) << name;
    }
  }
}

TEST(Lora, UnfrozenGroupsTrainBesideTheAdapters) {
  torch::manual_seed(7);
  auto cfg = tiny_config("gpt2", "q", 2);
  cfg.set("lora.unfreeze", "norms,head", "test");
  auto m = build_model(options::read_model_options(cfg, 0), core::Runtime::cpu());
  const auto& tags = m->param_tags();
  EXPECT_TRUE(tags.at("transformer.h.0.ln_1.weight").trainable);
  EXPECT_TRUE(tags.at("transformer.ln_f.bias").trainable);
  EXPECT_TRUE(tags.at("lm_head.weight").trainable);
  EXPECT_FALSE(tags.at("transformer.wte.weight").trainable);
  EXPECT_FALSE(tags.at("transformer.h.0.attn.c_attn.weight").trainable);
  optim::FlatParams flat(*m, tags);
  EXPECT_NO_THROW(flat.segment("lm_head.weight"));
  EXPECT_THROW(flat.segment("transformer.h.0.mlp.c_fc.weight"), Error);
  auto tied = tiny_config("gpt2", "q", 2);
  tied.set("model.tie_embeddings", "true", "test");
  tied.set("lora.unfreeze", "head", "test");
  EXPECT_THROW(options::read_lora_options(tied), UsageError);
  tied.set("lora.unfreeze", "norms,bogus", "test");
  EXPECT_THROW(options::read_lora_options(tied), UsageError);
}

TEST(Lora, MergedWeightsEqualTheAdapterForward) {
  for (const std::string arch : {"gpt2", "qwen3"}) {
    torch::manual_seed(11);
    auto m = build_model(options::read_model_options(tiny_config(arch, kAll, 4), 0),
                         core::Runtime::cpu());
    randomize_b(*m);
    m->eval();
    auto plain_cfg = tiny_config(arch, kAll, 0);
    auto merged = build_model(options::read_model_options(plain_cfg, 0), core::Runtime::cpu(),
                              {/*init=*/false, {}});
    auto params = merged->named_parameters();
    auto buffers = merged->named_buffers();
    torch::NoGradGuard no_grad;
    for (const auto& [name, t] : merged_state_tensors(*m)) {
      if (params.contains(name)) {
        params[name].copy_(t);
      } else {
        buffers[name].copy_(t);
      }
    }
    merged->eval();
    auto ids = torch::randint(37, {2, 9}, torch::kLong);
    auto a = m->forward(ids), b = merged->forward(ids);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5) << arch;
  }
}

TEST(Lora, ConfigErrorsNameTheKey) {
  auto expect_error = [](core::Config cfg, const std::string& part) {
    try {
      options::read_lora_options(cfg);
      // What LoRA needs of the optimizer, the command checks reading the run's options.
      cli::read_run_options(cfg, 1, core::Runtime::cpu());
      FAIL() << "no error for " << part;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(tiny_config("gpt2", "q,x", 4), "'lora.targets'");
  auto tied = tiny_config("gpt2", "q,head", 4);
  tied.set("model.tie_embeddings", "true", "test");
  expect_error(tied, "model.tie_embeddings");
  auto muon = tiny_config("gpt2", "q", 4);
  muon.set("optim.name", "muon", "test");
  expect_error(muon, "optim.name=adamw");
  auto yaml = core::Config::defaults();
  yaml.merge_yaml_text("lora:\n  targets: [q, k, mlp_in]\n", "test.yaml");
  EXPECT_EQ(yaml.get_string("lora.targets"), "q,k,mlp_in");  // a YAML list, comma-joined
  EXPECT_EQ(parse_lora_targets("q, v ,o").size(), 3u);
  EXPECT_EQ(parse_lora_targets("[q, k]").size(), 2u);
}

}  // namespace
}  // namespace lmtrain::model
