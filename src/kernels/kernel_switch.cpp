#include "kernels/kernel_switch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {
namespace {

std::atomic<FusedKernelMode>& mode_flag() {
  static std::atomic<FusedKernelMode> mode{[] {
    const char* env = std::getenv("LMTRAIN_FUSED_KERNELS");
    if (env && std::strcmp(env, "0") == 0) return FusedKernelMode::kOff;
    if (env && std::strcmp(env, "1") == 0) return FusedKernelMode::kOn;
    return FusedKernelMode::kAuto;
  }()};
  return mode;
}

}  // namespace

// A kernel is proven once its named GPU test (tests/cuda/) passed on a device; flip a kernel's
// flag (and the README's list) in the commit that reports the passing run. The run of 2026-11-27
// (H100 80GB HBM3, scripts/device_check.sh first) passed the SwiGlu, QkvSplit, Classifier and
// CudaMoeRows tests; the run of 2026-11-28 (same card, commit acfc91c) passed
// AddNormMatchesLibtorch, after its reference's fix (libtorch's CUDA layer_norm refuses a bf16
// input with fp32 weights: norm_unfused does that mix in fp32).
const FusedKernelInfo kFusedKernels[6] = {
    {FusedKernel::kAddNorm, "add_norm", true},       // CudaFusedKernels.AddNorm*
    {FusedKernel::kSwiGlu, "swiglu", true},          // CudaFusedKernels.SwiGlu*
    {FusedKernel::kQkvSplit, "qkv_split", true},     // CudaFusedKernels.QkvSplit*
    {FusedKernel::kClassifier, "classifier", true},  // CudaFusedKernels.Classifier*
    {FusedKernel::kMoeRows, "moe_rows", true},       // CudaMoeRows.*
    // CudaFusedKernels.ClassifierVectorized* (2026-11-28, not yet run on a device)
    {FusedKernel::kClassifierVectorized, "classifier_vectorized", false},
};

#ifndef LMTRAIN_CUDA_KERNELS
bool fused_cuda_kernels_built() { return false; }
#endif

FusedKernelMode fused_kernel_mode() { return mode_flag().load(std::memory_order_relaxed); }

void set_fused_kernel_mode(FusedKernelMode mode) { mode_flag() = mode; }

bool fused_kernel_enabled(FusedKernel kernel, bool on_cuda) {
  const FusedKernelMode mode = fused_kernel_mode();
  if (mode == FusedKernelMode::kOff) return false;
  if (on_cuda && !fused_cuda_kernels_built()) return false;
  if (mode == FusedKernelMode::kOn) return true;
  return on_cuda && kFusedKernels[static_cast<int>(kernel)].proven_on_gpu;
}

bool fused_cpu_kernels_enabled() { return fused_kernel_mode() != FusedKernelMode::kOff; }

void set_fused_cpu_kernels_enabled(bool on) {
  set_fused_kernel_mode(on ? FusedKernelMode::kAuto : FusedKernelMode::kOff);
}

}  // namespace lmtrain::kernels
