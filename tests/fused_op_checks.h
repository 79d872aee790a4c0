// The checks of the fused ops (model/fused_add_norm.h, fused_swiglu.h, fused_qkv_split.h and
// the classifier of chunked_cross_entropy.h), run on any device: the fused path
// (train.fused_kernels=on: the CPU reference on the CPU, the CUDA kernel on a GPU) against
// libtorch's ops (off), forward and backward through autograd. The CPU suite runs them on the
// references (tests/model/fused_gpu_ops_reference_test.cpp), the GPU suite on the kernels
// (tests/cuda/cuda_fused_kernels_test.cpp).
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/runtime.h"
#include "kernels/kernel_switch.h"
#include "model/chunked_cross_entropy.h"
#include "model/fused_add_norm.h"
#include "model/fused_qkv_split.h"
#include "model/fused_swiglu.h"
#include "model/gpt.h"

namespace lmtrain::testing {

// Sets the kernel mode for one scope and restores the one before.
class KernelModeScope {
 public:
  explicit KernelModeScope(kernels::FusedKernelMode mode) : before_(kernels::fused_kernel_mode()) {
    kernels::set_fused_kernel_mode(mode);
  }
  ~KernelModeScope() { kernels::set_fused_kernel_mode(before_); }
  KernelModeScope(const KernelModeScope&) = delete;
  KernelModeScope& operator=(const KernelModeScope&) = delete;

 private:
  kernels::FusedKernelMode before_;
};

// max |a - b| / (max |b| + tiny): differences relative to the reference's scale.
inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const auto af = a.to(at::kFloat).cpu(), bf = b.to(at::kFloat).cpu();
  return (af - bf).abs().max().item<double>() / (bf.abs().max().item<double>() + 1e-12);
}

// fp32 differs only by the order of row sums; bf16 by where each side rounds (the fused path
// rounds once per stored value, libtorch after some intermediate ops too).
inline double forward_tolerance(at::ScalarType t) { return t == at::kFloat ? 1e-5 : 2e-2; }
inline double backward_tolerance(at::ScalarType t) { return t == at::kFloat ? 1e-4 : 4e-2; }
inline std::string dtype_name(at::ScalarType t) { return t == at::kFloat ? "fp32" : "bf16"; }

// Random tensors drawn on the CPU (the same numbers on every device), then moved.
inline at::Tensor draw(at::Tensor cpu, at::ScalarType dtype, c10::Device dev) {
  return cpu.to(dtype).to(dev);
}

// ---- residual add + norm ------------------------------------------------------------------
struct AddNormCase {
  bool rms, bias, delta;
  at::ScalarType dtype;
};
inline std::string add_norm_case_name(const AddNormCase& c) {
  return std::string(c.rms ? "Rms" : "Layer") + (c.bias ? "Bias" : "") + (c.delta ? "Add" : "") +
         "_" + dtype_name(c.dtype);
}
inline std::vector<AddNormCase> add_norm_cases() {
  return {{false, true, true, at::kFloat},    {false, false, false, at::kFloat},
          {true, false, true, at::kFloat},    {true, false, false, at::kFloat},
          {false, true, true, at::kBFloat16}, {true, false, true, at::kBFloat16}};
}

inline void check_add_norm(const AddNormCase& c, c10::Device dev, int64_t rows = 15,
                           int64_t C = 48) {
  torch::manual_seed(3);
  auto x = draw(torch::randn({rows, C}) * 2 + 0.5, c.dtype, dev).requires_grad_(true);
  auto delta =
      c.delta ? draw(torch::randn({rows, C}), c.dtype, dev).requires_grad_(true) : at::Tensor();
  auto w = draw(torch::rand({C}) + 0.5, at::kFloat, dev).requires_grad_(true);  // fp32 params
  auto b = c.bias && !c.rms ? draw(torch::randn({C}), at::kFloat, dev).requires_grad_(true)
                            : at::Tensor();
  auto probe_y = draw(torch::randn({rows, C}), at::kFloat, dev);
  auto probe_h = draw(torch::randn({rows, C}), at::kFloat, dev);
  auto run = [&](kernels::FusedKernelMode mode) {
    KernelModeScope scope(mode);
    EXPECT_EQ(model::add_norm_fused(x, delta), mode == kernels::FusedKernelMode::kOn);
    auto out = model::add_norm(x, delta, w, b, c.rms, 1e-5);
    auto loss = (out.y.to(at::kFloat) * probe_y).sum();
    if (c.delta) loss = loss + (out.h.to(at::kFloat) * probe_h).sum();
    std::vector<at::Tensor> inputs{x, w};
    if (c.delta) inputs.push_back(delta);
    if (b.defined()) inputs.push_back(b);
    return std::make_pair(out, torch::autograd::grad({loss}, inputs));
  };
  auto [ref, ref_grads] = run(kernels::FusedKernelMode::kOff);
  auto [got, got_grads] = run(kernels::FusedKernelMode::kOn);
  EXPECT_EQ(got.y.scalar_type(), c.dtype);
  EXPECT_LE(relative_error(got.y, ref.y), forward_tolerance(c.dtype));
  if (c.delta) {
    EXPECT_LE(relative_error(got.h, ref.h), forward_tolerance(c.dtype));
  }
  const char* names[] = {"x", "w", "delta or b", "b"};
  for (size_t i = 0; i < ref_grads.size(); ++i) {
    EXPECT_EQ(got_grads[i].scalar_type(), ref_grads[i].scalar_type()) << names[i];
    EXPECT_LE(relative_error(got_grads[i], ref_grads[i]), backward_tolerance(c.dtype)) << names[i];
  }
}

// ---- SwiGLU -------------------------------------------------------------------------------
inline void check_swiglu(at::ScalarType dtype, c10::Device dev, int64_t rows = 14,
                         int64_t hidden = 40) {
  torch::manual_seed(5);
  auto h = draw(torch::randn({rows, 2 * hidden}) * 3, dtype, dev).requires_grad_(true);
  auto probe = draw(torch::randn({rows, hidden}), at::kFloat, dev);
  auto run = [&](kernels::FusedKernelMode mode) {
    KernelModeScope scope(mode);
    auto y = model::swiglu(h, hidden);
    auto g = torch::autograd::grad({(y.to(at::kFloat) * probe).sum()}, {h});
    return std::make_pair(y, g[0]);
  };
  auto [ref, ref_grad] = run(kernels::FusedKernelMode::kOff);
  auto [got, got_grad] = run(kernels::FusedKernelMode::kOn);
  EXPECT_EQ(got.scalar_type(), dtype);
  EXPECT_LE(relative_error(got, ref), forward_tolerance(dtype));
  EXPECT_LE(relative_error(got_grad, ref_grad), backward_tolerance(dtype));
}

// ---- packed QKV -> q, k, v ----------------------------------------------------------------
struct QkvCase {
  bool qk_norm, rope;
  int64_t kv_heads;
  at::ScalarType dtype;
};
inline std::string qkv_case_name(const QkvCase& c) {
  return std::string(c.qk_norm ? "QkNorm" : "") + (c.rope ? "Rope" : "") + "Kv" +
         std::to_string(c.kv_heads) + "_" + dtype_name(c.dtype);
}
inline std::vector<QkvCase> qkv_cases() {
  return {{true, true, 2, at::kFloat},
          {false, true, 4, at::kFloat},
          {true, false, 1, at::kFloat},
          {false, false, 2, at::kFloat},
          {true, true, 2, at::kBFloat16}};
}

inline void check_qkv_split(const QkvCase& c, c10::Device dev, int64_t T = 6, int64_t D = 16) {
  torch::manual_seed(6);
  const int64_t B = 2, H = 4, K = c.kv_heads;
  auto packed = draw(torch::randn({B, T, (H + 2 * K) * D}), c.dtype, dev).requires_grad_(true);
  model::QkvSplitSpec spec;
  spec.n_head = H;
  spec.n_kv_head = K;
  spec.head_dim = D;
  spec.rope = c.rope;
  spec.rope_params = 10000.0;
  if (c.qk_norm) {
    spec.q_norm_weight = draw(torch::rand({D}) + 0.5, at::kFloat, dev).requires_grad_(true);
    spec.k_norm_weight = draw(torch::rand({D}) + 0.5, at::kFloat, dev).requires_grad_(true);
    spec.norm_eps = 1e-6;
  }
  auto pq = draw(torch::randn({B, H, T, D}), at::kFloat, dev);
  auto pk = draw(torch::randn({B, K, T, D}), at::kFloat, dev);
  auto pv = draw(torch::randn({B, K, T, D}), at::kFloat, dev);
  auto run = [&](kernels::FusedKernelMode mode) {
    KernelModeScope scope(mode);
    auto heads = model::qkv_split(packed, spec);
    auto loss = (heads.q.to(at::kFloat) * pq).sum() + (heads.k.to(at::kFloat) * pk).sum() +
                (heads.v.to(at::kFloat) * pv).sum();
    std::vector<at::Tensor> inputs{packed};
    if (c.qk_norm) {
      inputs.push_back(spec.q_norm_weight);
      inputs.push_back(spec.k_norm_weight);
    }
    return std::make_pair(heads, torch::autograd::grad({loss}, inputs));
  };
  auto [ref, ref_grads] = run(kernels::FusedKernelMode::kOff);
  auto [got, got_grads] = run(kernels::FusedKernelMode::kOn);
  EXPECT_TRUE(got.q.is_contiguous());
  EXPECT_EQ(got.q.sizes(), ref.q.sizes());
  EXPECT_EQ(got.k.sizes(), ref.k.sizes());
  EXPECT_LE(relative_error(got.q, ref.q), forward_tolerance(c.dtype));
  EXPECT_LE(relative_error(got.k, ref.k), forward_tolerance(c.dtype));
  EXPECT_LE(relative_error(got.v, ref.v), forward_tolerance(c.dtype));
  const char* names[] = {"packed", "q_norm", "k_norm"};
  for (size_t i = 0; i < ref_grads.size(); ++i)
    EXPECT_LE(relative_error(got_grads[i], ref_grads[i]), backward_tolerance(c.dtype)) << names[i];
}

// ---- the LM head's classifier (chunked cross-entropy) -------------------------------------
// chunked_linear_cross_entropy with the classifier kernel (on) against libtorch's softmax ops
// (off): loss, dx and dW, with every fourth row ignored, chunks that do not divide the rows,
// in fp32 or under bf16 autocast, with or without a soft cap.
inline void check_classifier(at::ScalarType dtype, double cap, c10::Device dev, int64_t N = 37,
                             int64_t C = 24, int64_t V = 301, int64_t chunk = 16) {
  torch::manual_seed(8);
  auto x = draw(torch::randn({N, C}), at::kFloat, dev);
  auto w = draw(torch::randn({V, C}) * 0.7, at::kFloat, dev);
  auto t = torch::randint(V, {N}, torch::kLong);
  t.index_put_({torch::arange(0, N, 4)}, model::kIgnoreIndex);
  t = t.to(dev);
  auto run = [&](kernels::FusedKernelMode mode) {
    KernelModeScope scope(mode);
    auto xx = x.clone().requires_grad_(true), ww = w.clone().requires_grad_(true);
    core::AutocastScope autocast(dev.type(), dtype == at::kBFloat16, at::kBFloat16);
    auto loss = model::chunked_linear_cross_entropy(xx, ww, t, cap, chunk);
    auto grads = torch::autograd::grad({loss * 0.37}, {xx, ww});
    return std::make_tuple(loss.item<double>(), grads[0], grads[1]);
  };
  auto [ref_loss, ref_dx, ref_dw] = run(kernels::FusedKernelMode::kOff);
  auto [got_loss, got_dx, got_dw] = run(kernels::FusedKernelMode::kOn);
  EXPECT_NEAR(got_loss, ref_loss, 1e-5 * std::abs(ref_loss));
  // Both sides round dlogits to bf16 under autocast, at different points.
  EXPECT_LE(relative_error(got_dx, ref_dx), backward_tolerance(dtype));
  EXPECT_LE(relative_error(got_dw, ref_dw), backward_tolerance(dtype));
  EXPECT_EQ(got_dx.narrow(0, 0, 1).abs().max().item<double>(), 0.0);  // an ignored row
}

// ---- whole models ------------------------------------------------------------------------
struct LossAndGrads {
  double loss;
  std::map<std::string, at::Tensor> grads;  // by parameter name; those that got one
};

// One forward and backward of `model` on (ids, targets) in kernel mode `mode`, under bf16
// autocast on the model's device type when `bf16`.
inline LossAndGrads loss_and_grads(model::GptImpl& model, const at::Tensor& ids,
                                   const at::Tensor& targets, kernels::FusedKernelMode mode,
                                   bool bf16 = false) {
  KernelModeScope scope(mode);
  core::AutocastScope autocast(ids.device().type(), bf16, at::kBFloat16);
  model.zero_grad();
  auto loss = model.loss(ids, targets);
  loss.backward();
  LossAndGrads out{loss.item<double>(), {}};
  for (auto& p : model.named_parameters()) {
    if (p.value().grad().defined()) out.grads[p.key()] = p.value().grad().clone();
  }
  return out;
}

// The same model with `on` (the fused ops) and `reference_mode`: losses within `loss_tol` and
// every gradient within `grad_tol`, relative. `what` names the case in failures.
inline void expect_fused_model_matches(model::GptImpl& model, const at::Tensor& ids,
                                       const at::Tensor& targets,
                                       kernels::FusedKernelMode reference_mode, bool bf16,
                                       double loss_tol, double grad_tol, const std::string& what) {
  const LossAndGrads ref = loss_and_grads(model, ids, targets, reference_mode, bf16);
  LossAndGrads got = loss_and_grads(model, ids, targets, kernels::FusedKernelMode::kOn, bf16);
  EXPECT_NEAR(got.loss, ref.loss, loss_tol * ref.loss) << what;
  ASSERT_EQ(got.grads.size(), ref.grads.size()) << what;
  for (const auto& [name, g] : ref.grads)
    EXPECT_LT(relative_error(got.grads[name], g), grad_tol) << what << " " << name;
}

// ---- a few training steps ------------------------------------------------------------------
// `steps` optimizer steps of `model` on one fixed batch under bf16 autocast on the model's
// device type; returns each step's loss.
inline std::vector<double> bf16_training_losses(model::GptImpl& model, const at::Tensor& ids,
                                                const at::Tensor& targets,
                                                torch::optim::Optimizer& opt, int steps) {
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    core::AutocastScope autocast(ids.device().type(), true, at::kBFloat16);
    opt.zero_grad();
    auto loss = model.loss(ids, targets);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

// `steps` SGD steps (lr 0.1) of a fresh model of `cfg` (seed 21) on `dev`, one fixed random
// batch of 4 x 64 tokens, in kernel mode `mode`: each step's loss.
inline std::vector<double> bf16_training_losses(const model::GptConfig& cfg, c10::Device dev,
                                                kernels::FusedKernelMode mode, int steps = 5) {
  KernelModeScope scope(mode);
  torch::manual_seed(21);
  model::Gpt m(cfg);
  m->to(dev);
  auto ids = torch::randint(cfg.vocab_size, {4, 64}, torch::kLong).to(dev);
  auto targets = torch::randint(cfg.vocab_size, {4, 64}, torch::kLong).to(dev);
  torch::optim::SGD opt(m->parameters(), 0.1);
  return bf16_training_losses(*m, ids, targets, opt, steps);
}

}  // namespace lmtrain::testing
