// One switch for lmtrain's own kernels (train.fused_kernels: auto | on | off):
// - the hand-written fp32 CPU kernels (kernels/cpu_kernels.h) that replace libtorch's generic
//   ops in CPU training: fused attention, linear + cross-entropy, GELU(tanh), the Adam update;
// - the fused GPU kernels (kernels/fused_cuda.h: residual add + norm, SwiGLU, packed QKV with
//   QK-norm and RoPE, the LM head's cross-entropy with its gradient in place), each with a CPU
//   reference (kernels/fused_reference.h); and the MoE row moves (kernels/moe_rows_cuda.h,
//   references in kernels/moe_rows_reference.h).
//
// auto: the CPU kernels, and on a GPU only the fused kernels a GPU run has proven (the GPU tests
//       tests/cuda/cuda_fused_kernels_test.cpp passed on a device: see kFusedKernels below and
//       the README's list);
// on:   every kernel, and on the CPU the fused kernels' references too (slow: for tests that
//       check the model wiring on the CPU, and to try unproven GPU kernels);
// off:  libtorch's ops everywhere (A/B in benchmarks, ruling the kernels out when debugging).
//
// Process-wide: set once at start-up from the config (core::Runtime::activate), read by the
// ops' dispatch points in model/ (each op decides there, not its call sites). The environment
// variable LMTRAIN_FUSED_KERNELS=0|1 sets the starting mode (off|on) before any config is read.
#pragma once

namespace lmtrain::kernels {

// The enumerators stand in the order of train.fused_kernels' choices.
enum class FusedKernelMode { kAuto, kOn, kOff };

// The fused GPU kernels, each switched on by itself. kClassifierVectorized is a variant of
// kClassifier (16-byte loads and stores, the same math), used where both are on.
enum class FusedKernel {
  kAddNorm,
  kSwiGlu,
  kQkvSplit,
  kClassifier,
  kMoeRows,
  kClassifierVectorized
};

struct FusedKernelInfo {
  FusedKernel kernel;
  const char* name;    // as in logs and the README
  bool proven_on_gpu;  // its GPU tests passed on a device: `auto` turns it on there
};
// Every fused kernel, in enum order.
extern const FusedKernelInfo kFusedKernels[6];

FusedKernelMode fused_kernel_mode();
void set_fused_kernel_mode(FusedKernelMode mode);

// Whether `kernel` replaces libtorch's ops for a tensor on the GPU (`on_cuda`) or the CPU.
// On the GPU it also needs a build with the kernels (fused_cuda_kernels_built()).
bool fused_kernel_enabled(FusedKernel kernel, bool on_cuda);

// The CPU kernels: on unless the mode is off.
bool fused_cpu_kernels_enabled();
// For tests: true restores `auto`, false is `off`.
void set_fused_cpu_kernels_enabled(bool on);

}  // namespace lmtrain::kernels
