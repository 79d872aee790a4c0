// A tied token table's lookup rows sent after backward on their own (model/deferred_lookup.h,
// parallel/deferred_table_grad.h): over a real two-rank Gloo group, the averaged gradient equals
// the mean of the two ranks' single-process gradients, with and without accumulation
// micro-steps, and the table's bucket is already out when the lookup's backward runs.
#include "parallel/deferred_table_grad.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"

namespace lmtrain::train {
namespace {

// Records how many buckets had gone out when each lookup's rows arrived.
class RecordingSink : public DeferredTableGrad {
 public:
  RecordingSink(dist::GradSync& sync, size_t param, int64_t rows, int64_t width)
      : DeferredTableGrad(sync, param, rows, width, 2), sync_(sync) {}
  bool take(const at::Tensor& ids, const at::Tensor& rows) override {
    const bool taken = DeferredTableGrad::take(ids, rows);
    if (taken) launched_at_take.push_back(sync_.launched());
    return taken;
  }
  std::vector<size_t> launched_at_take;

 private:
  dist::GradSync& sync_;
};

class DeferredTableGradTest : public ::testing::TestWithParam<int> {};

TEST_P(DeferredTableGradTest, RanksAverageTheLookupRowsAsTheWholeTable) {
  const int accum = GetParam();
  auto cfg = model::tiny_gpt_config(32, 256, 16);  // tied: the head is the table
  ASSERT_TRUE(cfg.tie_embeddings);
  // RoPE: no position table, whose lookup would end backward beside the token table's.
  cfg.pos = model::PosEncoding::kRope;
  // rank, micro-step, rows, T+1; 2 ranks x 64 tokens <= 256 table rows: the lookup defers.
  auto data = torch::randint(256, {2, accum, 4, 17}, torch::kLong);
  struct Replica {
    model::Gpt model;
    std::unique_ptr<optim::FlatParams> flat;
  };
  std::vector<Replica> replicas;
  for (int i = 0; i < 4; ++i) {  // built up front: the global RNG is not for two threads
    torch::manual_seed(1);
    Replica r{model::Gpt(cfg), nullptr};
    r.flat = std::make_unique<optim::FlatParams>(
        *r.model, [&](const std::string& n) { return r.model->decays(n); }, /*pad=*/32);
    replicas.push_back(std::move(r));
  }

  std::vector<size_t> buckets(2);
  std::vector<std::vector<size_t>> launched_at_take(2);
  auto grads_of = [&](int rank, dist::Group* group) {
    auto& rep = replicas[rank + (group ? 2 : 0)];
    auto& m = rep.model;
    auto& flat = *rep.flat;
    std::unique_ptr<dist::GradSync> sync;
    std::unique_ptr<RecordingSink> sink;
    if (group) {
      auto named = m->named_parameters();
      std::vector<at::Tensor> params;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      size_t table = 0;
      for (const auto& s : flat.segments()) {
        if (s.name == "transformer.wte.weight") table = params.size();
        params.push_back(named[s.name]);
        ranges.emplace_back(s.offset, s.numel);
      }
      sync = std::make_unique<dist::GradSync>(*group, params, ranges, flat.grads(), 4096);
      sink = std::make_unique<RecordingSink>(*sync, table, cfg.vocab_size, cfg.n_embd);
      m->transformer->wte->set_lookup_grad_sink(sink.get());
      buckets[rank] = sync->buckets().size();
      // The table's accumulator fires with the head's part first: its bucket, alone, goes first.
      const size_t first = sync->launch_order().front();
      EXPECT_EQ(sync->buckets()[first].params, std::vector<size_t>{table});
    }
    flat.zero_grad();
    for (int s = 0; s < accum; ++s) {
      auto rows = data[rank][s];
      if (sync && s == accum - 1) sync->arm();
      (m->loss(rows.narrow(1, 0, 16), rows.narrow(1, 1, 16)) / accum).backward();
    }
    if (sync) {
      sync->finish();
      launched_at_take[rank] = sink->launched_at_take;
      m->transformer->wte->set_lookup_grad_sink(nullptr);
    }
    return flat.grads().clone();
  };

  const auto expected = (grads_of(0, nullptr) + grads_of(1, nullptr)) / 2;
  std::vector<at::Tensor> got(2);
  const auto errors = testing::run_ranks_in_process(
      2, [&](int r, dist::Group& group) { got[r] = grads_of(r, &group); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(torch::allclose(got[r], expected, 1e-6, 1e-7))
        << "rank " << r << ": max diff " << (got[r] - expected).abs().max().item<float>();
    // The last micro-step's lookup deferred once, after every bucket (the table's too) had left.
    ASSERT_EQ(launched_at_take[r].size(), 1u) << "rank " << r;
    EXPECT_EQ(launched_at_take[r][0], buckets[r]) << "rank " << r;
  }
  EXPECT_TRUE(torch::equal(got[0], got[1]));  // the same sum, in the same order, on both ranks
}

INSTANTIATE_TEST_SUITE_P(MicroSteps, DeferredTableGradTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace lmtrain::train
