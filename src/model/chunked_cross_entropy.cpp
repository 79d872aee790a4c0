#include "model/chunked_cross_entropy.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "model/fused_classifier.h"
#include "model/fused_kernel_call.h"
#include "model/gpt.h"
#include "model/soft_cap.h"

namespace lmtrain::model {
namespace {

// `logit_bytes`: the size of the widest (rows, V) element a chunk holds: fp32 on libtorch's
// path, the GEMM dtype's with the fused classifier (its only (rows, V) tensor).
int64_t rows_per_chunk(int64_t requested, int64_t vocab, int64_t logit_bytes) {
  if (requested > 0) return requested;
  // 256 MiB of logits per chunk; whole multiples of 64 rows keep the GEMMs tiled.
  const int64_t budget = (int64_t{1} << 28) / logit_bytes;
  return std::max<int64_t>(64, budget / std::max<int64_t>(vocab, 1) / 64 * 64);
}

// out (fp32) = a b, or += a b with `accumulate`. On a GPU cuBLAS writes (or adds) the fp32
// result of bf16 operands directly (mm/addmm's out_dtype); elsewhere the product is made in
// the operands' dtype, then added.
void mm_into_fp32(at::Tensor out, const at::Tensor& a, const at::Tensor& b, bool accumulate) {
  if (out.is_cuda() && a.scalar_type() == at::kBFloat16) {
    if (accumulate) {
      at::addmm_out(out, out, a, b, at::kFloat);
    } else {
      at::mm_out(out, a, b, at::kFloat);
    }
    return;
  }
  const at::Tensor product = at::mm(a, b);
  if (accumulate) {
    out.add_(product);
  } else {
    out.copy_(product);
  }
}

// One pass over the chunks. Returns the mean loss (fp32 scalar on x's device); given `dx`, also
// writes d(mean loss)/dx into it (N, C), given `dw`, adds d/dW into it (V, C) fp32. `fused`:
// the classifier kernel instead of libtorch's softmax ops (decided once per call, with the chunk
// size it implies).
at::Tensor chunked_pass(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets,
                        double softcap, int64_t chunk, at::ScalarType gemm, bool fused,
                        at::Tensor* dx, at::Tensor* dw) {
  // Explicit dtypes below; autocast would only recast what is already cast.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const int64_t N = x.size(0);
  const at::Tensor w = weight.to(gemm);                 // (V, C)
  const at::Tensor valid = targets.ne(kIgnoreIndex);    // (N,)
  const at::Tensor index = targets.clamp_min(0);        // (N,) ignored rows read column 0
  const at::Tensor count = valid.sum().to(at::kFloat);  // device scalar: no host read
  const at::Tensor inv_count = count.clamp_min(1).reciprocal();
  at::Tensor loss_sum = at::zeros({}, x.options().dtype(at::kFloat));
  for (int64_t lo = 0; lo < N; lo += chunk) {
    const int64_t n = std::min(chunk, N - lo);
    const at::Tensor xc = x.narrow(0, lo, n).to(gemm);            // (n, C)
    const at::Tensor tc = index.narrow(0, lo, n).unsqueeze(1);    // (n, 1)
    const at::Tensor vc = valid.narrow(0, lo, n).to(at::kFloat);  // (n,)
    at::Tensor logits = at::mm(xc, w.t());  // (n, V) in the GEMM dtype; fp32 once capped
    if (fused) {
      // The kernel turns the logits into dlogits / count in place (rows without a target: 0).
      const bool grad = dx != nullptr || dw != nullptr;
      const at::Tensor row_loss = classifier_(logits, tc.squeeze(1), vc * inv_count, softcap, grad);
      loss_sum.add_((row_loss * vc).sum());
      if (dx) mm_into_fp32(dx->narrow(0, lo, n), logits, w, false);  // (n, C)
      if (dw) mm_into_fp32(*dw, logits.t(), xc, true);               // (V, C)
      continue;
    }
    if (softcap > 0) logits = soft_cap_(logits.to(at::kFloat), softcap);
    at::Tensor logp = at::log_softmax(logits, 1, at::kFloat);  // (n, V) fp32
    loss_sum.sub_((logp.gather(1, tc).squeeze(1) * vc).sum());
    if (dx == nullptr && dw == nullptr) continue;
    // dlogits = (softmax - onehot) / count on rows with a target. The row factor acts on the
    // (n, C) operands of the two GEMMs, not on the (n, V) probabilities.
    at::Tensor probs = logp.exp_();
    probs.scatter_add_(1, tc, at::full({n, 1}, -1.0, probs.options()));
    soft_cap_backward_(probs, logits, softcap);
    const at::Tensor g = probs.to(gemm);                   // (n, V)
    const at::Tensor row = (vc * inv_count).unsqueeze(1);  // (n, 1)
    if (dx) dx->narrow(0, lo, n).copy_(at::mm(g, w).to(at::kFloat).mul_(row));
    if (dw) dw->add_(at::mm(g.t(), (xc.to(at::kFloat) * row).to(gemm)));
  }
  return loss_sum * inv_count;
}

// The gradients are computed in forward, chunk by chunk, so no (N, V) tensor outlives a chunk;
// backward scales them by the incoming gradient.
class ChunkedLinearCrossEntropy : public torch::autograd::Function<ChunkedLinearCrossEntropy> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& weight, const at::Tensor& targets, double softcap,
                            int64_t chunk, at::ScalarType gemm, bool fused) {
    const at::Tensor x = x_in.contiguous();
    at::Tensor dx, dw;  // only those asked for
    if (ctx->needs_input_grad(0)) dx = at::empty_like(x, x.options().dtype(at::kFloat));
    if (ctx->needs_input_grad(1))
      dw = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    at::Tensor loss = chunked_pass(x, weight, targets.contiguous(), softcap, chunk, gemm, fused,
                                   dx.defined() ? &dx : nullptr, dw.defined() ? &dw : nullptr);
    ctx->save_for_backward({dx, dw});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x_in.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return loss;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor g = grads[0].to(at::kFloat);  // 0-dim: no host read
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    auto scaled = [&](const at::Tensor& d, at::ScalarType dtype) {
      return d.defined() ? (d * g).to(dtype) : at::Tensor();
    };
    return {scaled(saved[0], x_dtype),
            scaled(saved[1], w_dtype),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& targets, double softcap,
                                        int64_t chunk_rows) {
  // The head's GEMMs run in autocast's dtype where it is on (the unfused head's linear would be
  // cast to it), else x's own.
  const at::ScalarType gemm = fused::compute_dtype(x);
  const bool fused = classifier_fused(x.is_cuda(), gemm);
  const int64_t chunk =
      rows_per_chunk(chunk_rows, weight.size(0), fused ? at::elementSize(gemm) : 4);
  if (at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad())) {
    return ChunkedLinearCrossEntropy::apply(x, weight, targets, softcap, chunk, gemm, fused);
  }
  return chunked_pass(x.contiguous(), weight, targets.contiguous(), softcap, chunk, gemm, fused,
                      nullptr, nullptr);
}

}  // namespace lmtrain::model
