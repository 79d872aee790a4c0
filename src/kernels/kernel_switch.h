// One switch for the hand-written fp32 CPU kernels (kernels/cpu_kernels.h) that replace
// libtorch's generic ops in training: fused attention, linear + cross-entropy, GELU(tanh),
// the Adam update.
#pragma once

namespace lmtrain::kernels {

// On unless LMTRAIN_FUSED_KERNELS=0 is set in the environment (read once): the switch exists
// to A/B the kernels against libtorch's ops (bench) and to rule them out when debugging.
// Each kernel still applies only to contiguous fp32 CPU tensors; anything else takes the
// libtorch path.
bool fused_cpu_kernels_enabled();
// Overrides the environment (tests compare both paths in one process).
void set_fused_cpu_kernels_enabled(bool on);

}  // namespace lmtrain::kernels
