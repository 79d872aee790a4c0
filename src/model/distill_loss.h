// The knowledge-distillation loss of a student against a teacher, per token:
//   loss = alpha * kd + (1 - alpha) * ce
//   kd   = T^2 * KL(softmax(z_t / T) || softmax(z_s / T))     (Hinton et al.; T^2 keeps the
//          soft-target gradient's scale independent of T)
//   ce   = cross-entropy of the student's logits z_s against the target token
// averaged over the rows. z = cap * tanh(x W^T / cap) with a soft-cap (cap > 0), else x W^T.
//
// distill_loss_chunked never holds either model's full (N, V) logits: it walks the rows in
// chunks, computes both models' logits for the chunk, the loss, and the gradient with respect
// to the student's hidden states and head weight right there (the same shape as
// fused_linear_cross_entropy, model/fused_cross_entropy.h); backward only scales the stored
// (N, C) and (V, C) gradients. distill_loss_from_logits is the plain autograd formula on full
// logits: the reference the chunked path is tested against.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

struct DistillLossSpec {
  double temperature = 4.0;
  double alpha = 0.7;
  double student_softcap = 0;  // the models' model.logit_softcap
  double teacher_softcap = 0;
  int64_t chunk_rows = 512;  // rows per chunk of the chunked path
  // > 0 (< V): the teacher seen through its top_k largest logits per row, as an offline teacher
  // cache stores it: kd over those k tokens plus one bucket for the rest of the vocabulary
  // (topk_tail_kd).
  int64_t top_k = 0;
};

// kd restricted to the teacher's top-k support, per row, at temperature T:
//   KL over {the k tokens} + {the rest}: sum_k p_t,k log(p_t,k / p_s,k) + p_t,rest log(p_t,rest /
//   p_s,rest), with p_t,k = exp(z_t,k / T - lse_t) exact (lse_t: the log-sum-exp of all the
//   teacher's logits / T) and p_t,rest = 1 - sum_k p_t,k.
// ls_t: the student's log_softmax(z_s / T) (n, V); vals, idx: the teacher's k largest logits and
// their ids (n, k); lse_t (n,). kd_rows (n,) is differentiable through ls_t; with want_target,
// target (n, V) is what the student's softmax(z_s / T) is pulled towards (the gradient of kd_rows
// with respect to z_s / T is p_s - target).
struct TopKTail {
  at::Tensor kd_rows, target;
};
TopKTail topk_tail_kd(const at::Tensor& ls_t, const at::Tensor& vals, const at::Tensor& idx,
                      const at::Tensor& lse_t, double T, bool want_target);

struct DistillLoss {
  at::Tensor loss;  // differentiable scalar (the student's dtype promoted to fp32)
  at::Tensor kd;    // detached float scalars: the two terms' means
  at::Tensor ce;
};

// hs: student hidden (N, Cs), ws: student head (V, Cs), both differentiable; ht: teacher hidden
// (N, Ct) and wt: teacher head (V, Ct), not differentiated; targets (N,) int64 in [0, V), every
// one valid (the caller drops masked rows). N = 0 gives zero losses that still carry a graph.
// Computes in fp32 at least (float64 operands stay float64, for gradient checks).
DistillLoss distill_loss_chunked(const at::Tensor& hs, const at::Tensor& ws, const at::Tensor& ht,
                                 const at::Tensor& wt, const at::Tensor& targets,
                                 const DistillLossSpec& spec);

// The teacher given by its k largest (soft-capped) logits per row followed by the log-sum-exp of
// all its logits / T, teacher_logits (N, k + 1) float, and the k logits' vocabulary ids
// teacher_index (N, k) int64 (an offline teacher cache): kd as topk_tail_kd.
DistillLoss distill_loss_chunked_cached(const at::Tensor& hs, const at::Tensor& ws,
                                        const at::Tensor& teacher_logits,
                                        const at::Tensor& teacher_index, const at::Tensor& targets,
                                        const DistillLossSpec& spec);

// zs: student logits (N, V) (differentiable), zt: teacher logits (N, V), targets (N,); the
// logits already soft-capped.
DistillLoss distill_loss_from_logits(const at::Tensor& zs, const at::Tensor& zt,
                                     const at::Tensor& targets, const DistillLossSpec& spec);

}  // namespace lmtrain::model
