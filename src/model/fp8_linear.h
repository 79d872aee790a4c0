// FP8 linear layers (train.precision=fp8): the block's matmuls on fp8 tensor cores, everything
// else as in bf16 mixed precision (fp32 master weights, bf16 autocast).
//
// Scaling is per tensor and current (TransformerEngine's "current scaling"): each GEMM operand is
// scaled so that its largest magnitude maps to the format's largest value, from the tensor
// itself, every call. No amax history, so nothing to checkpoint and nothing that differs between
// a resumed and an uninterrupted run. Activations and weights are e4m3 (more mantissa),
// gradients e5m2 (more range), as in TE and torchao:
//   forward   y  = x W^T       x e4m3, W e4m3, bf16 out
//   backward  dx = dy W        dy e5m2, W e4m3 (the forward's), bf16 out
//             dW = dy^T x      dy e5m2, x e4m3 (the forward's), fp32 out
// The GEMMs are at::_scaled_mm: cuBLASLt's fp8 kernels on sm89+ (H100: twice bf16's peak), and
// libtorch's CPU implementation elsewhere (the same op and scaling math: the CPU tests run what
// the GPU runs, up to the GEMM's accumulation order). Only the activations saved for the
// backward are fp8 too: half of bf16's memory.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>

namespace lmtrain::model {

class GptImpl;

// t in fp8: data (t's shape, `fp8_type`) and the fp32 scalar that dequantizes it,
// t ~= data * inv_scale, with inv_scale = amax(|t|) / max(fp8_type) (1 for an all-zero t).
struct Fp8Tensor {
  at::Tensor data;
  at::Tensor inv_scale;
};
// Local amax (fp32 scalar) -> the whole tensor's amax, for an operand that is a slice of a
// bigger one (parallel/tp_fp8.h makes it a MAX all-reduce over the tensor-parallel group, so
// model code makes no collective call). Empty: the operand is whole here.
using Fp8AmaxOfWhole = std::function<at::Tensor(const at::Tensor& local_amax)>;
Fp8Tensor quantize_fp8(const at::Tensor& t, at::ScalarType fp8_type,
                       const Fp8AmaxOfWhole& amax_of_whole = nullptr);

// How a layer split over ranks runs fp8_linear (parallel/tp_fp8.h) so that it sees the scales
// and roundings of one process: the scales of the operands that are slices come from the whole
// tensor's amax, and the products that the caller sums over the ranks leave in fp32 (one
// rounding to bf16 after the sum, as one process rounds its whole product once).
struct Fp8Split {
  Fp8AmaxOfWhole x, w, dy;  // the operands that are slices here
  bool partial_y = false;   // y in fp32: the caller sums it over the ranks
  bool partial_dx = false;  // dx in fp32: the caller's backward sums it over the ranks
};

// y = x W^T + b through fp8 GEMMs: x (..., in), w (out, in), b (out) or undefined -> (..., out)
// in bf16 (fp32 with split->partial_y). Differentiable in x, w and b. `split` (or null) must
// outlive the backward: its owner is the plan that installed the layer's product.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                      const Fp8Split* split = nullptr);

// Whether fp8_linear runs for these operands: in and out multiples of 16 (the fp8 GEMMs' rule;
// rows are padded), float types, CPU or a CUDA device of compute capability 8.9 or newer.
bool fp8_linear_supported(const at::Tensor& x, const at::Tensor& w);

// Turns fp8 on for every linear layer inside the blocks (attention and dense MLP projections);
// the embeddings, the LM head, MoE routers and experts, and LoRA adapters stay in bf16.
// Returns how many layers it switched.
int64_t use_fp8_block_linears(GptImpl& model);

}  // namespace lmtrain::model
