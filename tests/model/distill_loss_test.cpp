// The distillation loss against a direct formula written with explicit sums (float64), its
// gradient against central finite differences of that formula, the chunked path against the
// full-logits path, and the limits: T = 1 with alpha = 0 is plain cross-entropy; a teacher equal
// to the student leaves no kd loss.
#include "model/distill_loss.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>

namespace lmtrain::model {
namespace {

struct Problem {
  at::Tensor hs, ws, ht, wt, targets;  // (N, Cs), (V, Cs), (N, Ct), (V, Ct), (N,)
};

Problem make_problem(int64_t N, int64_t V, int64_t Cs, int64_t Ct, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  Problem p;
  p.hs = at::randn({N, Cs}, gen, opts);
  p.ws = at::randn({V, Cs}, gen, opts) * 0.7;
  p.ht = at::randn({N, Ct}, gen, opts);
  p.wt = at::randn({V, Ct}, gen, opts) * 0.7;
  p.targets = at::randint(V, {N}, gen, at::TensorOptions().dtype(at::kLong));
  return p;
}

// alpha T^2 mean_n sum_v p_t log(p_t / p_s) + (1 - alpha) mean_n -log p_s[target], written out
// with explicit loops over plain doubles.
double direct_loss(const Problem& p, const DistillLossSpec& s) {
  auto zs = at::mm(p.hs, p.ws.t()), zt = at::mm(p.ht, p.wt.t());
  const int64_t N = zs.size(0), V = zs.size(1);
  auto cap = [](double z, double c) { return c > 0 ? c * std::tanh(z / c) : z; };
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> a(V), b(V);
    for (int64_t v = 0; v < V; ++v) {
      a[v] = cap(zs[n][v].item<double>(), s.student_softcap);
      b[v] = cap(zt[n][v].item<double>(), s.teacher_softcap);
    }
    double za = 0, zb = 0, z1 = 0;
    for (int64_t v = 0; v < V; ++v) {
      za += std::exp(a[v] / s.temperature);
      zb += std::exp(b[v] / s.temperature);
      z1 += std::exp(a[v]);
    }
    double kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double pt = std::exp(b[v] / s.temperature) / zb;
      const double ps = std::exp(a[v] / s.temperature) / za;
      kl += pt * std::log(pt / ps);
    }
    const double ce = -(a[p.targets[n].item<int64_t>()] - std::log(z1));
    total += s.alpha * s.temperature * s.temperature * kl + (1 - s.alpha) * ce;
  }
  return total / static_cast<double>(N);
}

TEST(DistillLoss, MatchesDirectFormulaAndFiniteDifferences) {
  DistillLossSpec spec;
  spec.temperature = 2.5;
  spec.alpha = 0.6;
  spec.chunk_rows = 2;
  for (double softcap : {0.0, 3.0}) {
    spec.student_softcap = softcap;
    spec.teacher_softcap = softcap;
    Problem p = make_problem(5, 7, 4, 6, 1);
    auto hs = p.hs.clone().requires_grad_(true), ws = p.ws.clone().requires_grad_(true);
    auto d = distill_loss_chunked(hs, ws, p.ht, p.wt, p.targets, spec);
    EXPECT_NEAR(d.loss.item<double>(), direct_loss(p, spec), 1e-12) << "softcap " << softcap;
    EXPECT_NEAR(d.loss.item<double>(),
                spec.alpha * d.kd.item<double>() + (1 - spec.alpha) * d.ce.item<double>(), 1e-12);
    d.loss.backward();
    // Central differences of the direct formula, every element of hs and ws.
    const double h = 1e-6;
    for (auto [param, grad] : {std::pair{&p.hs, hs.grad()}, std::pair{&p.ws, ws.grad()}}) {
      auto flat = param->view({-1});
      auto g = grad.reshape({-1});
      for (int64_t i = 0; i < flat.numel(); ++i) {
        const double x0 = flat[i].item<double>();
        flat[i] = x0 + h;
        const double up = direct_loss(p, spec);
        flat[i] = x0 - h;
        const double down = direct_loss(p, spec);
        flat[i] = x0;
        EXPECT_NEAR(g[i].item<double>(), (up - down) / (2 * h), 1e-7) << "element " << i;
      }
    }
  }
}

TEST(DistillLoss, ChunkedEqualsFullLogits) {
  Problem p = make_problem(13, 11, 5, 8, 2);
  DistillLossSpec spec;
  for (int64_t chunk : {1, 4, 13, 100}) {
    spec.chunk_rows = chunk;
    auto hs_a = p.hs.clone().requires_grad_(true), ws_a = p.ws.clone().requires_grad_(true);
    auto a = distill_loss_chunked(hs_a, ws_a, p.ht, p.wt, p.targets, spec);
    (a.loss * 3.0).backward();  // a non-unit upstream gradient reaches both inputs
    auto hs_b = p.hs.clone().requires_grad_(true), ws_b = p.ws.clone().requires_grad_(true);
    auto b =
        distill_loss_from_logits(at::mm(hs_b, ws_b.t()), at::mm(p.ht, p.wt.t()), p.targets, spec);
    (b.loss * 3.0).backward();
    EXPECT_NEAR(a.loss.item<double>(), b.loss.item<double>(), 1e-12) << "chunk " << chunk;
    EXPECT_NEAR(a.kd.item<double>(), b.kd.item<double>(), 1e-12);
    EXPECT_NEAR(a.ce.item<double>(), b.ce.item<double>(), 1e-12);
    EXPECT_TRUE(at::allclose(hs_a.grad(), hs_b.grad(), 1e-10, 1e-12)) << "chunk " << chunk;
    EXPECT_TRUE(at::allclose(ws_a.grad(), ws_b.grad(), 1e-10, 1e-12)) << "chunk " << chunk;
  }
}

TEST(DistillLoss, TopKTeacherChunkedCachedAndFullLogitsAgree) {
  Problem p = make_problem(10, 20, 5, 7, 8);
  DistillLossSpec spec;
  spec.top_k = 4;
  spec.chunk_rows = 3;
  spec.temperature = 1.5;
  auto run = [&](auto loss_fn) {
    auto hs = p.hs.clone().requires_grad_(true), ws = p.ws.clone().requires_grad_(true);
    DistillLoss d = loss_fn(hs, ws);
    d.loss.backward();
    return std::make_tuple(d.loss.item<double>(), hs.grad(), ws.grad());
  };
  auto [online, online_hs, online_ws] = run([&](const at::Tensor& hs, const at::Tensor& ws) {
    return distill_loss_chunked(hs, ws, p.ht, p.wt, p.targets, spec);
  });
  auto [full, full_hs, full_ws] = run([&](const at::Tensor& hs, const at::Tensor& ws) {
    return distill_loss_from_logits(at::mm(hs, ws.t()), at::mm(p.ht, p.wt.t()), p.targets, spec);
  });
  auto zt = at::mm(p.ht, p.wt.t());
  auto [vals, idx] = at::topk(zt, 4, 1);
  auto lse = at::logsumexp(zt / spec.temperature, 1, /*keepdim=*/true);
  auto [cached, cached_hs, cached_ws] = run([&](const at::Tensor& hs, const at::Tensor& ws) {
    return distill_loss_chunked_cached(hs, ws, at::cat({vals, lse}, 1), idx, p.targets, spec);
  });
  EXPECT_NEAR(online, full, 1e-12);
  EXPECT_NEAR(cached, full, 1e-12);
  EXPECT_TRUE(at::allclose(online_hs, full_hs, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(cached_hs, full_hs, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(cached_ws, full_ws, 1e-10, 1e-12));
  // Restricting the teacher changes the loss (the test would not see a dropped top_k).
  spec.top_k = 0;
  auto [dense, dense_hs, dense_ws] = run([&](const at::Tensor& hs, const at::Tensor& ws) {
    return distill_loss_chunked(hs, ws, p.ht, p.wt, p.targets, spec);
  });
  EXPECT_GT(std::abs(dense - online), 1e-3);
}

// kd over the top-k plus the rest, written out: the teacher's exact probabilities of its k
// largest logits and the mass left over, against the student's.
double direct_topk_kd(const at::Tensor& zs, const at::Tensor& zt, int64_t k, double T) {
  const int64_t N = zs.size(0), V = zs.size(1);
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    auto top = std::get<1>(at::topk(zt[n], k));
    std::vector<bool> in_top(V, false);
    for (int64_t i = 0; i < k; ++i) in_top[top[i].item<int64_t>()] = true;
    double zs_sum = 0, zt_sum = 0;
    for (int64_t v = 0; v < V; ++v) {
      zs_sum += std::exp(zs[n][v].item<double>() / T);
      zt_sum += std::exp(zt[n][v].item<double>() / T);
    }
    double pt_rest = 1, ps_rest = 1, kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      if (!in_top[v]) continue;
      const double pt = std::exp(zt[n][v].item<double>() / T) / zt_sum;
      const double ps = std::exp(zs[n][v].item<double>() / T) / zs_sum;
      kl += pt * std::log(pt / ps);
      pt_rest -= pt;
      ps_rest -= ps;
    }
    total += kl + pt_rest * std::log(pt_rest / ps_rest);
  }
  return T * T * total / static_cast<double>(N);
}

TEST(DistillLoss, TopKPlusRestMatchesDirectFormulaAndFiniteDifferences) {
  Problem p = make_problem(4, 9, 3, 5, 9);
  DistillLossSpec spec;
  spec.top_k = 3;
  spec.alpha = 1.0;
  spec.temperature = 2.0;
  spec.chunk_rows = 3;
  auto hs = p.hs.clone().requires_grad_(true);
  auto d = distill_loss_chunked(hs, p.ws, p.ht, p.wt, p.targets, spec);
  auto zt = at::mm(p.ht, p.wt.t());
  auto kd_of = [&](const at::Tensor& h) { return direct_topk_kd(at::mm(h, p.ws.t()), zt, 3, 2.0); };
  EXPECT_NEAR(d.loss.item<double>(), kd_of(p.hs), 1e-12);
  d.loss.backward();
  auto flat = p.hs.view({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double x0 = flat[i].item<double>();
    flat[i] = x0 + 1e-6;
    const double up = kd_of(p.hs);
    flat[i] = x0 - 1e-6;
    const double down = kd_of(p.hs);
    flat[i] = x0;
    EXPECT_NEAR(hs.grad().view({-1})[i].item<double>(), (up - down) / 2e-6, 1e-7) << i;
  }
}

TEST(DistillLoss, Float32ChunkedMatchesFloat64) {
  Problem p = make_problem(64, 50, 16, 24, 3);
  DistillLossSpec spec;
  spec.chunk_rows = 7;
  auto hs = p.hs.to(at::kFloat).requires_grad_(true);
  auto d = distill_loss_chunked(hs, p.ws.to(at::kFloat), p.ht.to(at::kFloat), p.wt.to(at::kFloat),
                                p.targets, spec);
  EXPECT_EQ(d.loss.scalar_type(), at::kFloat);
  d.loss.backward();
  auto hs64 = p.hs.clone().requires_grad_(true);
  auto ref = distill_loss_chunked(hs64, p.ws, p.ht, p.wt, p.targets, spec);
  ref.loss.backward();
  EXPECT_NEAR(d.loss.item<double>(), ref.loss.item<double>(), 1e-5 * ref.loss.item<double>());
  EXPECT_TRUE(at::allclose(hs.grad().to(at::kDouble), hs64.grad(), 1e-4, 1e-7));
}

TEST(DistillLoss, TemperatureOneAlphaZeroIsCrossEntropy) {
  Problem p = make_problem(9, 12, 6, 6, 4);
  DistillLossSpec spec;
  spec.temperature = 1.0;
  spec.alpha = 0.0;
  spec.chunk_rows = 4;
  auto hs = p.hs.clone().requires_grad_(true);
  auto d = distill_loss_chunked(hs, p.ws, p.ht, p.wt, p.targets, spec);
  d.loss.backward();
  auto hs_ref = p.hs.clone().requires_grad_(true);
  auto ce = at::cross_entropy_loss(at::mm(hs_ref, p.ws.t()), p.targets);
  ce.backward();
  EXPECT_NEAR(d.loss.item<double>(), ce.item<double>(), 1e-12);
  EXPECT_TRUE(at::allclose(hs.grad(), hs_ref.grad(), 1e-10, 1e-13));
}

TEST(DistillLoss, TeacherEqualToStudentLeavesNoKd) {
  Problem p = make_problem(6, 9, 5, 5, 5);
  DistillLossSpec spec;
  spec.alpha = 1.0;
  auto hs = p.hs.clone().requires_grad_(true);
  auto d = distill_loss_chunked(hs, p.ws, p.hs, p.ws, p.targets, spec);
  d.loss.backward();
  EXPECT_NEAR(d.kd.item<double>(), 0.0, 1e-12);
  EXPECT_LT(hs.grad().abs().max().item<double>(), 1e-12);
}

TEST(DistillLoss, NoRowsGivesZeroWithAGraph) {
  Problem p = make_problem(0, 9, 5, 5, 6);
  auto hs = p.hs.clone().requires_grad_(true), ws = p.ws.clone().requires_grad_(true);
  auto d = distill_loss_chunked(hs, ws, p.ht, p.wt, p.targets, DistillLossSpec{});
  EXPECT_EQ(d.loss.item<double>(), 0.0);
  d.loss.backward();
  ASSERT_TRUE(ws.grad().defined());
  EXPECT_EQ(ws.grad().abs().sum().item<double>(), 0.0);
}

TEST(DistillLoss, VocabularyMismatchIsAnError) {
  Problem p = make_problem(3, 9, 5, 5, 7);
  auto wt = at::randn({10, 5}, at::kDouble);
  try {
    distill_loss_chunked(p.hs, p.ws, p.ht, wt, p.targets, DistillLossSpec{});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::model
