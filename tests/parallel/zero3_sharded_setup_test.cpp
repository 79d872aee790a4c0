// ZeRO-3's sharded set-up (parallel/sharded_init.h, train/init_from_shard.h; issue 42: models
// bigger than one device): no rank ever builds or reads the whole model. The model is built
// unwritten, the flat layout born sharded (optim::ShardOnly), the initial weights drawn one
// parameter at a time into this rank's shard, or read by range from model.init_from.
// - Peak resident memory (VmHWM, reset through /proc/self/clear_refs) of the whole set-up on
//   two real Gloo ranks in this process, each with a ~92 MB fp32 model of 12 blocks, stays
//   below the shards (parameters, gradients, Adam moments) plus one parameter's scratch plus a
//   margin; the set-up of today's whole build (build, FlatParams, FullyShard) is measured
//   beside it and printed: it holds a whole model per rank more (see the README's figures).
// - The shards equal, bit for bit, the slices of a whole-model build from the same seed: plain
//   GPT, nanochat's parts (value embeddings, smear, backout, lambdas: the generator order of
//   GptImpl::init_weights) and MoE, with and without an expert-parallel placement.
// - model.init_from read by range: the shards equal the saved model's slices, and reading them
//   grows the resident memory by about a shard, not a model.
// - A LoRA base read by range into the frozen shards: the sharded model's loss is the whole
//   loaded one's, bit for bit, and the set-up holds the trained and frozen shards only.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/training_checkpoint.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/safetensors.h"
#include "e2e/dist_harness.h"
#include "model/build_model.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"
#include "optim/optimizer_factory.h"
#include "optim/zero_adamw.h"
#include "parallel/fully_shard.h"
#include "parallel/sharded_init.h"
#include "rss_probe.h"
#include "test_util.h"
#include "train/init_from_shard.h"

namespace lmtrain::parallel {
namespace {

optim::ShardOnly cpu_shard(int rank, int ranks, bool keep_experts = false) {
  return optim::ShardOnly{rank, ranks, keep_experts, torch::TensorOptions().dtype(at::kFloat)};
}

std::vector<optim::ParamSource> model_source(model::GptImpl& m) {
  return {{"", &m, m.param_tags()}};
}

model::GptConfig big_config() {
  auto cfg = model::tiny_gpt_config(384, 4096, 64);  // ~23.4M parameters, ~92 MB fp32
  cfg.n_layer = 12;
  cfg.n_head = 6;
  return cfg;
}

int64_t largest_param_bytes(model::GptImpl& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n = std::max<int64_t>(n, p.numel() * 4);
  return n;
}

TEST(Zero3ShardedSetupTest, HoldsOnlyTheShardsAndOneParameterAndEqualsTheWholeInit) {
  const testing::MallocFollowsTensors malloc_scope;
  const auto cfg = big_config();
  const int world = 2;
  optim::OptimizerOptions opts;
  opts.zero = 3;
  const int64_t pad = optim::flat_pad_multiple(opts, world);
  torch::manual_seed(3);
  model::Gpt whole_model(cfg);
  optim::FlatParams whole(*whole_model, whole_model->param_tags(), pad);
  const int64_t model_bytes = whole.numel() * 4;
  const int64_t scratch = largest_param_bytes(*whole_model);

  // The sharded set-up: build unwritten, born-sharded layout, init from the seed, optimizer,
  // FullyShard. The global generator is not for threads: the ranks draw one after the other.
  std::mutex generator;
  const int64_t shard_numel = whole.numel() / world;
  std::vector<bool> equal(world, false), released(world, false);
  std::vector<model::Gpt> keep(world, model::Gpt(nullptr));
  const auto sharded = testing::measure_ranks_setup(
      2, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
        std::unique_lock<std::mutex> lock(generator);
        torch::manual_seed(3);
        keep[r] = model::Gpt(cfg, /*init=*/false);
        auto& m = *keep[r];
        auto flat = std::make_unique<optim::FlatParams>(model_source(m), pad, cpu_shard(r, world));
        torch::manual_seed(3);
        init_shard_from_seed(m, *flat);
        lock.unlock();
        optim::ZeroAdamW adam(*flat, opts.adamw, group, 3);
        FullyShard fsdp(m, *flat, group, nullptr, /*reshard_after_forward=*/true);
        equal[r] = flat->shard_begin() == r * shard_numel &&
                   torch::equal(flat->param_slice(r * shard_numel, shard_numel),
                                whole.params().narrow(0, r * shard_numel, shard_numel));
        released[r] = storage_released(m.transformer->blocks[0]->attn->c_attn->weight) &&
                      storage_released(m.transformer->wte->weight);
        mark_peak();
        const auto b = fsdp.bytes();
        return b.param_shard + b.grad_shard + adam.state_bytes() + scratch;
      });
  for (int r = 0; r < world; ++r) ASSERT_EQ(sharded.errors[r], "") << "rank " << r;
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(equal[r]) << "rank " << r << "'s master shard differs from the whole init's slice";
    EXPECT_TRUE(released[r]) << "rank " << r << ": a unit's buffer is still allocated";
  }
  keep.assign(world, model::Gpt(nullptr));

  // Today's whole build, for the figure: build, whole FlatParams, optimizer, FullyShard.
  const auto built_whole = testing::measure_ranks_setup(
      2, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
        std::unique_lock<std::mutex> lock(generator);
        torch::manual_seed(3);
        keep[r] = model::Gpt(cfg);
        lock.unlock();
        auto& m = *keep[r];
        optim::FlatParams flat(m, m.param_tags(), pad, optim::flat_grad_buffer(opts, world));
        optim::ZeroAdamW adam(flat, opts.adamw, group, 3);
        FullyShard fsdp(m, flat, group, nullptr, true);
        mark_peak();
        return int64_t{0};
      });
  keep.assign(world, model::Gpt(nullptr));
  // The whole build holds a model per rank more, at least while the last rank shards it (its
  // peak: both ranks' shards plus one whole model).
  testing::expect_set_up_within_bound(
      sharded, built_whole,
      log::format("ZeRO-3 set-up over %d ranks, %.1f MiB of fp32 model each, sharded", world,
                  model_bytes / 1048576.0));
}

// Every rank's shard from the seed is its slice of the whole model's layout, for models whose
// init writes parameters out of named_parameters() order (nanochat's parts, the value-embedding
// gates drawn twice) and expert stacks (an expert-parallel rank drawing the whole stack).
TEST(Zero3ShardedSetupTest, ShardsFromTheSeedEqualTheWholeInitForNanochatAndMoe) {
  auto nano = model::tiny_gpt_config(48, 64, 16);
  nano.n_layer = 3;
  nano.tie_embeddings = false;
  nano.x0_lambdas = nano.value_embeds = nano.smear = nano.backout = true;
  const auto moe = model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2);
  struct Case {
    const char* name;
    model::GptConfig cfg;
    model::ExpertPlacement experts;
    int ranks;
  };
  for (const Case& c : {Case{"nanochat", nano, {}, 3}, Case{"moe", moe, {}, 2},
                        Case{"moe ep rank 1 of 2", moe, {2, 2}, 2}}) {
    SCOPED_TRACE(c.name);
    const bool ep = c.experts.count > 0;
    torch::manual_seed(11);
    model::Gpt ref(c.cfg, true, c.experts);
    optim::FlatParams whole(*ref, ref->param_tags(), 16 * c.ranks);
    for (int r = 0; r < c.ranks; ++r) {
      torch::manual_seed(11);
      model::Gpt m(c.cfg, false, c.experts);
      optim::FlatParams flat(model_source(*m), 16 * c.ranks, cpu_shard(r, c.ranks, ep));
      torch::manual_seed(11);
      init_shard_from_seed(*m, flat);
      // The generator ends where the whole init left it.
      const auto after = torch::rand({4});
      torch::manual_seed(11);
      model::Gpt again(c.cfg, true, c.experts);
      EXPECT_TRUE(torch::equal(after, torch::rand({4})));
      EXPECT_TRUE(torch::equal(flat.param_slice(flat.shard_begin(), flat.shard_numel()),
                               whole.params().narrow(0, flat.shard_begin(), flat.shard_numel())))
          << "rank " << r;
      if (ep) {
        EXPECT_TRUE(torch::equal(flat.expert_params(), whole.expert_params()));
      }
    }
  }
}

// model.init_from under the sharded set-up reads only this rank's rows of each tensor.
TEST(Zero3ShardedSetupTest, InitFromReadsOnlyTheShardsRows) {
  const testing::MallocFollowsTensors malloc_scope;
  testing::TempDir dir("lmtrain_sharded_init_from");
  const auto cfg = big_config();
  const int world = 2;
  const int64_t pad = 16 * world;
  int64_t model_bytes = 0;
  {
    torch::manual_seed(5);
    model::Gpt saved(cfg);
    core::NamedTensors tensors;
    for (auto& [name, t] : saved->state_tensors()) tensors.emplace_back(name, t);
    core::write_safetensors(dir.file("model.safetensors"), tensors);
    optim::FlatParams whole(*saved, saved->param_tags(), pad);
    model_bytes = whole.numel() * 4;
  }
  train::LoadedCheckpoint src;
  src.dir = dir.path();
  src.meta = nlohmann::json::object();
  std::vector<model::Gpt> models;
  std::vector<std::unique_ptr<optim::FlatParams>> flats;
  for (int r = 0; r < world; ++r) {
    models.push_back(model::Gpt(cfg, /*init=*/false));
    flats.push_back(
        std::make_unique<optim::FlatParams>(model_source(*models[r]), pad, cpu_shard(r, world)));
  }
  const bool reset_ok = testing::reset_peak_rss();
  const int64_t base_kb = testing::proc_status_kb("VmRSS");
  for (int r = 0; r < world; ++r) train::load_init_shard(src, *models[r], *flats[r]);
  const int64_t peak_kb = testing::proc_status_kb("VmHWM");
  // The reference: the whole file, loaded as a whole build would.
  torch::manual_seed(5);
  model::Gpt ref(cfg);
  optim::FlatParams whole(*ref, ref->param_tags(), pad);
  for (int r = 0; r < world; ++r) {
    auto& f = *flats[r];
    EXPECT_TRUE(torch::equal(f.param_slice(f.shard_begin(), f.shard_numel()),
                             whole.params().narrow(0, f.shard_begin(), f.shard_numel())))
        << "rank " << r;
  }
  // A missing tensor is named.
  {
    core::NamedTensors partial;
    for (auto& [name, t] : ref->state_tensors()) {
      if (name != "transformer.ln_f.weight") partial.emplace_back(name, t);
    }
    testing::TempDir other("lmtrain_sharded_init_from_partial");
    core::write_safetensors(other.file("model.safetensors"), partial);
    train::LoadedCheckpoint bad = src;
    bad.dir = other.path();
    try {
      train::load_init_shard(bad, *models[0], *flats[0]);
      ADD_FAILURE() << "no error for a missing tensor";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("has no tensor 'transformer.ln_f.weight'"),
                std::string::npos)
          << e.what();
    }
  }
  if (!reset_ok || base_kb < 0 || peak_kb < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  // Each rank's reads: its shard's rows (a shard plus at most two rows per tensor) of one
  // tensor at a time, and the file's pages it maps for them.
  const double grown = (peak_kb - base_kb) / 1024.0;
  const double model_mib = model_bytes / 1048576.0;
  std::printf("init_from read by range on %d ranks, %.1f MiB model: peak RSS +%.1f MiB\n", world,
              model_mib, grown);
  EXPECT_LT(grown, model_mib / world + 16)
      << "reading the shards held " << grown / model_mib << " models";
}

// A LoRA base under the sharded set-up: its frozen weights read by range straight into the
// frozen shards (parallel::FrozenSource), never whole. The model evaluates to the loss of the
// same LoRA model built and loaded whole, bit for bit (the adapters start as a no-op, so this
// checks the base), and the set-up holds the shards, trained and frozen, plus one parameter.
TEST(Zero3ShardedSetupTest, LoraBaseIsReadByRangeIntoTheFrozenShards) {
  const testing::MallocFollowsTensors malloc_scope;
  testing::TempDir dir("lmtrain_sharded_lora_base");
  model::ModelOptions mo;
  mo.shape = big_config();
  mo.lora.rank = 8;
  const int world = 2;
  {
    torch::manual_seed(5);
    model::Gpt saved(mo.shape);
    core::NamedTensors tensors;
    for (auto& [name, t] : saved->state_tensors()) tensors.emplace_back(name, t);
    core::write_safetensors(dir.file("model.safetensors"), tensors);
  }
  train::LoadedCheckpoint src;
  src.dir = dir.path();
  src.meta = {{"files", {{"model.safetensors", {{"sha256", "0"}}}}}};
  const auto rt = core::Runtime::cpu();
  optim::OptimizerOptions opts;
  opts.zero = 3;
  const int64_t pad = optim::flat_pad_multiple(opts, world);
  auto rows = [](int r) {
    torch::manual_seed(100 + r);
    return torch::randint(0, 4096, {2, 33});
  };
  std::vector<float> want(world);
  int64_t scratch = 0;
  {
    torch::manual_seed(3);
    auto m = model::build_model(mo, rt);
    train::load_model_tensors(*m, core::read_safetensors(dir.file("model.safetensors")), "base",
                              train::ModelTensors::kBase);
    scratch = largest_param_bytes(*m);
    torch::NoGradGuard no_grad;
    for (int r = 0; r < world; ++r) {
      const auto ids = rows(r);
      want[r] = m->loss(ids.narrow(1, 0, 32), ids.narrow(1, 1, 32)).item<float>();
    }
  }
  std::mutex generator;
  std::vector<float> got(world, -1);
  const auto measured = testing::measure_ranks_setup(
      2, [&](int r, dist::Group& group, const testing::MarkPeak& mark_peak) {
        std::unique_lock<std::mutex> lock(generator);
        torch::manual_seed(3);
        auto m = model::build_model(mo, rt, {/*init=*/false, {}});
        auto flat = std::make_unique<optim::FlatParams>(model_source(*m), pad, cpu_shard(r, world));
        torch::manual_seed(3);
        init_shard_from_seed(*m, *flat);
        lock.unlock();
        train::load_init_shard(src, *m, *flat);
        auto frozen = train::frozen_init_source(src, *m);
        optim::ZeroAdamW adam(*flat, opts.adamw, group, 3);
        FullyShard fsdp(*m, *flat, group, nullptr, true, std::nullopt, false, frozen.read);
        mark_peak();
        const auto b = fsdp.bytes();
        fsdp.install();
        torch::NoGradGuard no_grad;
        fsdp.begin_forward_only();
        lock.lock();  // rows() seeds and draws from the global generator, which the ranks share
        const auto ids = rows(r);
        lock.unlock();
        got[r] = m->loss(ids.narrow(1, 0, 32), ids.narrow(1, 1, 32)).item<float>();
        fsdp.end_forward_only();
        return b.param_shard + b.grad_shard + adam.state_bytes() + b.frozen_shard + scratch;
      });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(measured.errors[r], "") << "rank " << r;
    EXPECT_EQ(got[r], want[r]) << "rank " << r;
  }
  if (measured.grown_mib < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const double bound = measured.allowed_mib + 24;
  std::printf("LoRA base read by range on %d ranks: set-up peak RSS +%.1f MiB (bound %.1f MiB)\n",
              world, measured.grown_mib, bound);
  EXPECT_LT(measured.grown_mib, bound);
}

}  // namespace
}  // namespace lmtrain::parallel
