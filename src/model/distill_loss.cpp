#include "model/distill_loss.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "core/runtime.h"
#include "model/soft_cap.h"

namespace lmtrain::model {
namespace {

// fp32 at least: bf16/fp16 hidden states from autocast are widened for the softmaxes.
at::ScalarType compute_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace

TopKTail topk_tail_kd(const at::Tensor& ls_t, const at::Tensor& vals, const at::Tensor& idx,
                      const at::Tensor& lse_t, double T, bool want_target) {
  const at::Tensor lt_k = vals / T - lse_t.unsqueeze(1);  // (n, k): exact teacher log-probs
  const at::Tensor pt_k = lt_k.exp();
  const at::Tensor pt_rest = (1.0 - pt_k.sum(1)).clamp_min(0.0);  // (n,)
  const at::Tensor ls_k = ls_t.gather(1, idx);                    // (n, k)
  // The student's log-mass outside the teacher's top-k (k < V: at least one token is left).
  const at::Tensor log_ps_rest =
      ls_t.scatter(1, idx, -std::numeric_limits<double>::infinity()).logsumexp(1);  // (n,)
  TopKTail r;
  r.kd_rows = (pt_k * (lt_k - ls_k)).sum(1) + at::xlogy(pt_rest, pt_rest) - pt_rest * log_ps_rest;
  if (want_target) {
    // d kd / d (z_s / T) = p_s - target: the teacher's probability on its top-k; elsewhere its
    // rest mass, spread like the student's own distribution outside the top-k.
    r.target = (ls_t - log_ps_rest.unsqueeze(1)).exp_().mul_(pt_rest.unsqueeze(1));
    r.target.scatter_(1, idx, pt_k);
  }
  return r;
}

namespace {

// How the teacher's distribution reaches the chunked loss.
enum TeacherMode : int64_t {
  kDense = 0,   // ht (N, Ct), wt (V, Ct): the full softmax of the teacher's logits
  kTopK = 1,    // ht, wt as kDense, seen through its k largest logits (topk_tail_kd)
  kCached = 2,  // ht = (N, k + 1): the k largest logits, then the log-sum-exp of all the
                // logits at temperature T; wt = their indices (N, k) int64
};

class ChunkedDistillLoss : public torch::autograd::Function<ChunkedDistillLoss> {
 public:
  // Returns {loss, kd, ce}; only loss is differentiable. The gradients with respect to hs and
  // ws are computed here, chunk by chunk, and stored; backward scales them.
  static torch::autograd::tensor_list forward(torch::autograd::AutogradContext* ctx,
                                              const at::Tensor& hs_in, const at::Tensor& ws_in,
                                              const at::Tensor& ht_in, const at::Tensor& wt_in,
                                              const at::Tensor& targets, double temperature,
                                              double alpha, double cap_s, double cap_t,
                                              int64_t chunk_rows, int64_t mode, int64_t top_k) {
    // Everything here in fp32 (or float64), also under a 16-bit autocast of the forward.
    core::AutocastScope no_autocast(hs_in.device().type(), false, at::kFloat);
    const auto dt = compute_type(hs_in);
    const at::Tensor hs = hs_in.to(dt).contiguous();  // (N, Cs)
    const at::Tensor ws = ws_in.to(dt).contiguous();  // (V, Cs)
    // kDense/kTopK: teacher hidden (N, Ct) and head (V, Ct); kCached: logits and indices (N, k).
    const at::Tensor ht = ht_in.to(dt).contiguous();
    const at::Tensor wt = mode == kCached ? wt_in.to(at::kLong) : wt_in.to(dt).contiguous();
    const int64_t N = hs.size(0);
    const double T = temperature;
    at::Tensor dhs = at::empty_like(hs);  // (N, Cs): d loss / d hs
    at::Tensor dws = at::zeros_like(ws);  // (V, Cs): d loss / d ws
    at::Tensor kd_sum = at::zeros({}, hs.options().dtype(at::kDouble));
    at::Tensor ce_sum = at::zeros({}, hs.options().dtype(at::kDouble));
    const double inv_n = N > 0 ? 1.0 / static_cast<double>(N) : 0.0;
    for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, N - r0);
      const at::Tensor h = hs.narrow(0, r0, n);
      const at::Tensor t = targets.narrow(0, r0, n).unsqueeze(1);  // (n, 1)
      const at::Tensor zs = soft_cap_(at::mm(h, ws.t()), cap_s);   // (n, V)
      const at::Tensor ls_t = at::log_softmax(zs / T, 1);          // student, at temperature T
      at::Tensor pt_t;  // (n, V): the teacher's probabilities at temperature T
      if (mode == kDense) {
        const at::Tensor zt = soft_cap_(at::mm(ht.narrow(0, r0, n), wt.t()), cap_t);
        const at::Tensor lt_t = at::log_softmax(zt / T, 1);
        pt_t = lt_t.exp();
        kd_sum += (pt_t * (lt_t - ls_t)).sum(at::kDouble);
      } else {
        // The teacher's k largest logits (n, k), their ids, and the log-sum-exp of all its
        // logits at temperature T (n,): kd over the top-k plus one bucket for the rest.
        at::Tensor vals, idx, lse_t;
        if (mode == kCached) {
          vals = ht.narrow(0, r0, n).narrow(1, 0, top_k);
          lse_t = ht.narrow(0, r0, n).select(1, top_k);
          idx = wt.narrow(0, r0, n);
        } else {
          const at::Tensor zt = soft_cap_(at::mm(ht.narrow(0, r0, n), wt.t()), cap_t);
          std::tie(vals, idx) = at::topk(zt, top_k, 1);
          lse_t = at::logsumexp(zt / T, 1);
        }
        auto tail = topk_tail_kd(ls_t, vals, idx, lse_t, T, /*want_target=*/true);
        kd_sum += tail.kd_rows.sum(at::kDouble);
        pt_t = tail.target;
      }
      const at::Tensor ls = T == 1.0 ? ls_t : at::log_softmax(zs, 1);
      ce_sum -= ls.gather(1, t).sum(at::kDouble);
      // d/dz_s of the row's loss: alpha T (softmax(z_s/T) - p_teacher)
      //                           + (1 - alpha) (softmax(z_s) - onehot(target)), then / N.
      at::Tensor dz = ls_t.exp().sub_(pt_t).mul_(alpha * T);
      dz.add_(ls.exp(), 1.0 - alpha);
      dz.scatter_add_(1, t, at::full({n, 1}, alpha - 1.0, dz.options()));
      dz.mul_(inv_n);
      soft_cap_backward_(dz, zs, cap_s);
      dhs.narrow(0, r0, n).copy_(at::mm(dz, ws));
      dws.addmm_(dz.t(), h);
    }
    ctx->save_for_backward({dhs, dws});
    ctx->saved_data["hs_type"] = static_cast<int64_t>(hs_in.scalar_type());
    ctx->saved_data["ws_type"] = static_cast<int64_t>(ws_in.scalar_type());
    const at::Tensor kd = kd_sum * (T * T * inv_n);
    const at::Tensor ce = ce_sum * inv_n;
    const at::Tensor loss = (kd * alpha + ce * (1.0 - alpha)).to(dt);
    ctx->mark_non_differentiable({kd, ce});
    return {loss, kd, ce};
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor g = grads[0];  // scalar, no host sync
    const auto hs_type = static_cast<at::ScalarType>(ctx->saved_data["hs_type"].toInt());
    const auto ws_type = static_cast<at::ScalarType>(ctx->saved_data["ws_type"].toInt());
    at::Tensor dhs, dws;
    if (ctx->needs_input_grad(0)) dhs = (saved[0] * g).to(hs_type);
    if (ctx->needs_input_grad(1)) dws = (saved[1] * g).to(ws_type);
    return {dhs, dws, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  }
};

void check_shapes(const at::Tensor& hs, const at::Tensor& ws, const at::Tensor& ht,
                  const at::Tensor& wt, const at::Tensor& targets) {
  if (hs.dim() != 2 || ws.dim() != 2 || ht.dim() != 2 || wt.dim() != 2 || targets.dim() != 1 ||
      hs.size(1) != ws.size(1) || ht.size(1) != wt.size(1) || hs.size(0) != ht.size(0) ||
      hs.size(0) != targets.size(0)) {
    throw Error(
        "distill_loss: expected hs (N, Cs), ws (V, Cs), ht (N, Ct), wt (V, Ct), targets (N,)");
  }
  if (ws.size(0) != wt.size(0)) {
    throw Error("distillation: the student's vocabulary (" + std::to_string(ws.size(0)) +
                ") differs from the teacher's (" + std::to_string(wt.size(0)) + ")");
  }
}

}  // namespace

DistillLoss distill_loss_chunked(const at::Tensor& hs, const at::Tensor& ws, const at::Tensor& ht,
                                 const at::Tensor& wt, const at::Tensor& targets,
                                 const DistillLossSpec& spec) {
  check_shapes(hs, ws, ht, wt, targets);
  if (spec.top_k > ws.size(0)) {
    throw UsageError("distill.top_k = " + std::to_string(spec.top_k) + " exceeds the vocabulary (" +
                     std::to_string(ws.size(0)) + ")");
  }
  auto out = ChunkedDistillLoss::apply(hs, ws, ht.detach(), wt.detach(), targets, spec.temperature,
                                       spec.alpha, spec.student_softcap, spec.teacher_softcap,
                                       std::max<int64_t>(1, spec.chunk_rows),
                                       spec.top_k > 0 ? kTopK : kDense, spec.top_k);
  return {out[0], out[1], out[2]};
}

DistillLoss distill_loss_chunked_cached(const at::Tensor& hs, const at::Tensor& ws,
                                        const at::Tensor& teacher_logits,
                                        const at::Tensor& teacher_index, const at::Tensor& targets,
                                        const DistillLossSpec& spec) {
  if (hs.dim() != 2 || ws.dim() != 2 || teacher_logits.dim() != 2 ||
      teacher_logits.size(1) != teacher_index.size(1) + 1 ||
      teacher_logits.size(0) != teacher_index.size(0) || hs.size(0) != teacher_logits.size(0) ||
      hs.size(0) != targets.size(0)) {
    throw Error(
        "distill_loss_chunked_cached: expected hs (N, C), ws (V, C), teacher (N, k + 1), (N, k)");
  }
  auto out = ChunkedDistillLoss::apply(hs, ws, teacher_logits.detach(), teacher_index.detach(),
                                       targets, spec.temperature, spec.alpha, spec.student_softcap,
                                       0.0, std::max<int64_t>(1, spec.chunk_rows), kCached,
                                       teacher_index.size(1));
  return {out[0], out[1], out[2]};
}

DistillLoss distill_loss_from_logits(const at::Tensor& zs_in, const at::Tensor& zt_in,
                                     const at::Tensor& targets, const DistillLossSpec& spec) {
  const auto dt = compute_type(zs_in);
  const at::Tensor zs = zs_in.to(dt);
  const at::Tensor zt = zt_in.detach().to(dt);
  const double T = spec.temperature;
  DistillLoss r;
  if (zs.size(0) == 0) {
    r.loss = zs.sum() * 0.0;
    r.kd = r.loss.detach();
    r.ce = r.loss.detach();
    return r;
  }
  const at::Tensor ls_t = at::log_softmax(zs / T, 1);
  at::Tensor kd;
  if (spec.top_k > 0) {  // the teacher through its k largest logits plus the rest
    auto [vals, idx] = at::topk(zt, spec.top_k, 1);
    kd = topk_tail_kd(ls_t, vals, idx, at::logsumexp(zt / T, 1), T, false).kd_rows.mean() * (T * T);
  } else {
    const at::Tensor lt_t = at::log_softmax(zt / T, 1);
    kd = (lt_t.exp() * (lt_t - ls_t)).sum(1).mean() * (T * T);
  }
  const at::Tensor ce = at::cross_entropy_loss(zs, targets);
  r.loss = kd * spec.alpha + ce * (1.0 - spec.alpha);
  r.kd = kd.detach();
  r.ce = ce.detach();
  return r;
}

}  // namespace lmtrain::model
