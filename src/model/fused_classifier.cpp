#include "model/fused_classifier.h"

#include <ATen/ATen.h>

#include "kernels/fused_reference.h"
#include "kernels/kernel_switch.h"
#include "model/fused_kernel_call.h"

namespace lmtrain::model {

bool classifier_fused(bool on_cuda, at::ScalarType logits_dtype) {
  return kernels::fused_kernel_enabled(kernels::FusedKernel::kClassifier, on_cuda) &&
         fused::kernel_dtype(logits_dtype);
}

at::Tensor classifier_(at::Tensor& logits, const at::Tensor& targets_in,
                       const at::Tensor& row_scale_in, double cap, bool write_grad) {
  const int64_t n = logits.size(0), V = logits.size(1);
  TORCH_CHECK(logits.is_contiguous(), "classifier_: the logits must be contiguous");
  const at::Tensor targets = targets_in.to(at::kLong).contiguous();
  const at::Tensor row_scale = row_scale_in.to(at::kFloat).contiguous();
  at::Tensor loss = at::empty({n}, logits.options().dtype(at::kFloat));
  if (logits.is_cuda()) {
    kernels::classifier_cuda(logits.data_ptr(), fused::element_type(logits),
                             targets.data_ptr<int64_t>(), row_scale.data_ptr<float>(), n, V,
                             static_cast<float>(cap), write_grad, loss.data_ptr<float>(),
                             kernels::fused_kernel_enabled(
                                 kernels::FusedKernel::kClassifierVectorized, /*on_cuda=*/true),
                             fused::current_stream(logits));
    return loss;
  }
  at::Tensor lf = logits.to(at::kFloat).contiguous();  // a copy for bf16; fp32 works in place
  kernels::classifier_reference(lf.data_ptr<float>(), targets.data_ptr<int64_t>(),
                                row_scale.data_ptr<float>(), n, V, static_cast<float>(cap),
                                logits.scalar_type() == at::kBFloat16, write_grad,
                                loss.data_ptr<float>());
  if (write_grad && !lf.is_same(logits)) logits.copy_(lf);
  return loss;
}

}  // namespace lmtrain::model
