#include "model/grouped_linear.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// _grouped_mm wants every operand's leading strides to be 16-byte multiples: inner dims that are
// multiples of 16 / element size. CUDA's kernel is bf16-only (sm90+); CPU has an fp32 one.
bool aligned(int64_t dim, const at::Tensor& t) { return (dim * t.element_size()) % 16 == 0; }

// Per-group fallback: out[rows of e] = a[rows of e] @ b_e, b_e = w[e] or w[e]^T.
at::Tensor loop_mm(const at::Tensor& a, const at::Tensor& w, const std::vector<int64_t>& counts,
                   bool transpose_w, int64_t out_dim) {
  auto out = at::empty({a.size(0), out_dim}, a.options());
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const int64_t n = counts[e];
    if (n == 0) continue;
    auto we = w.select(0, static_cast<int64_t>(e));
    auto rows = out.narrow(0, start, n);
    at::mm_out(rows, a.narrow(0, start, n), transpose_w ? we.t() : we);
    start += n;
  }
  return out;
}

// dW[e] = dy[rows of e]^T @ x[rows of e]: (E, out, in).
at::Tensor loop_weight_grad(const at::Tensor& dy, const at::Tensor& x,
                            const std::vector<int64_t>& counts) {
  auto dw = at::zeros({static_cast<int64_t>(counts.size()), dy.size(1), x.size(1)}, x.options());
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const int64_t n = counts[e];
    if (n == 0) continue;
    auto dwe = dw.select(0, static_cast<int64_t>(e));
    at::mm_out(dwe, dy.narrow(0, start, n).t(), x.narrow(0, start, n));
    start += n;
  }
  return dw;
}

class GroupedLinear : public torch::autograd::Function<GroupedLinear> {
 public:
  // Saves x, w and, on the grouped-GEMM path, the device offsets (the backward needs no host
  // counts then); on the loop path the host counts.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const ExpertGroups* groups) {
    if (grouped_mm_supported(x, w)) {
      const at::Tensor offs = groups->offsets(x.device());  // (E) int32 cumulative ends
      ctx->save_for_backward({x, w, offs});
      return at::_grouped_mm(x.contiguous(), w.transpose(1, 2), offs);  // (M, out)
    }
    ctx->save_for_backward({x, w, at::Tensor()});
    ctx->saved_data["counts"] = c10::List<int64_t>(groups->host());
    return loop_mm(x, w, groups->host(), /*transpose_w=*/true, w.size(1));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto& offs = saved[2];
    auto dy = grad_out[0].contiguous();  // (M, out)
    at::Tensor dx, dw;
    if (offs.defined()) {
      dx = at::_grouped_mm(dy, w.contiguous(), offs);  // (M, in)
      // Offsets along the reduction dim (rows): one (out, in) product per group; empty groups
      // come out zero.
      dw = at::_grouped_mm(dy.t(), x.contiguous(), offs);  // (E, out, in)
    } else {
      const auto list = ctx->saved_data["counts"].toIntList();
      const std::vector<int64_t> counts(list.begin(), list.end());
      dx = loop_mm(dy, w, counts, /*transpose_w=*/false, w.size(2));
      dw = loop_weight_grad(dy, x, counts);
    }
    return {dx, dw, at::Tensor()};
  }
};

}  // namespace

bool grouped_mm_supported(const at::Tensor& x, const at::Tensor& w) {
  if (x.scalar_type() != w.scalar_type() || x.size(0) == 0) return false;
  const bool dtype_ok =
      x.is_cuda() ? x.scalar_type() == at::kBFloat16 : x.is_cpu() && x.scalar_type() == at::kFloat;
  // CPU checked: any row count M works; CUDA's dW product reads dy^T, so keep M aligned there.
  return dtype_ok && aligned(w.size(1), x) && aligned(w.size(2), x) &&
         (!x.is_cuda() || aligned(x.size(0), x));
}

at::Tensor grouped_linear(const at::Tensor& x, const at::Tensor& w, const ExpertGroups& groups) {
  if (x.dim() != 2 || w.dim() != 3 || x.size(1) != w.size(2) || groups.size() != w.size(0)) {
    throw Error("internal: grouped_linear shapes x " + c10::str(x.sizes()) + ", w " +
                c10::str(w.sizes()) + ", " + std::to_string(groups.size()) + " groups");
  }
  // The op is not on autocast's lists: cast as autocast would for a linear (both operands to the
  // autocast dtype), else bring the weight to x's dtype.
  auto xc = x, wc = w;
  const auto type = x.device().type();
  if (at::autocast::is_autocast_enabled(type) && at::isFloatingType(x.scalar_type())) {
    const auto dtype = at::autocast::get_autocast_dtype(type);
    xc = xc.to(dtype);
    wc = wc.to(dtype);
  } else if (xc.scalar_type() != wc.scalar_type()) {
    wc = wc.to(xc.scalar_type());
  }
  return GroupedLinear::apply(xc, wc, &groups);
}

}  // namespace lmtrain::model
