// The runtime a run computes with: device and the three dtypes of mixed precision. Made once
// from the config (train.device, train.precision, train.grad_reduce_dtype, train.tf32) by the
// command (cli::read_runtime, cli/dist_setup.h) and
// passed to whatever creates tensors: the model builder, batches, dist::Group, the optimizer.
// Nothing below cli/ asks "are we on CUDA?" by itself.
//
// Mixed precision follows the common recipe (PyTorch AMP, llm.c): fp32 master weights and
// optimizer state; matmuls and attention in 16 bits under autocast, which casts weights at use;
// fp16 adds dynamic loss scaling (optim/loss_scaler.h).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "core/config_choice.h"

namespace lmtrain::core {

// train.device, train.precision and train.grad_reduce_dtype, their enumerators in the order of
// the keys' choices (config_choice.h).
enum class DeviceChoice { kAuto, kCpu, kCuda };      // auto: cuda when a GPU is visible
enum class Precision { kFp32, kBf16, kFp16, kFp8 };  // fp8: bf16 + fp8 block linears
enum class ReducePrecision { kFp32, kBf16 };
constexpr ChoiceKey choice_key(DeviceChoice) { return {"train.device", 3}; }
constexpr ChoiceKey choice_key(Precision) { return {"train.precision", 4}; }
constexpr ChoiceKey choice_key(ReducePrecision) { return {"train.grad_reduce_dtype", 2}; }
// train.fused_kernels: which of lmtrain's own kernels run (kernels/kernel_switch.h, whose
// FusedKernelMode has the same enumerators; cli/ applies the choice at start-up).
enum class FusedKernels { kAuto, kOn, kOff };
constexpr ChoiceKey choice_key(FusedKernels) { return {"train.fused_kernels", 3}; }
// train.attention_backend: the SDPA kernel libtorch tries first on CUDA.
enum class AttentionBackend { kAuto, kFlash, kCudnn, kEfficient, kMath };
constexpr ChoiceKey choice_key(AttentionBackend) { return {"train.attention_backend", 5}; }

struct Runtime {
  c10::Device device{c10::kCPU};
  Precision precision = Precision::kFp32;
  at::ScalarType param_dtype = at::kFloat;    // master weights, gradients, optimizer state
  at::ScalarType compute_dtype = at::kFloat;  // autocast dtype of matmuls and attention
  at::ScalarType reduce_dtype = at::kFloat;   // gradient all-reduce across ranks
  bool tf32 = true;
  FusedKernels fused_kernels = FusedKernels::kAuto;
  AttentionBackend attention = AttentionBackend::kAuto;

  bool cuda() const { return device.is_cuda(); }
  bool autocast() const { return compute_dtype != param_dtype; }
  bool loss_scaling() const { return precision == Precision::kFp16; }

  // The CPU fp32 runtime (tools that only read weights: export, counting).
  static Runtime cpu() { return Runtime{}; }
  // fp32 on `device` (generate, eval), TF32 off; errors name `flag`.
  static Runtime for_device(DeviceChoice device, const std::string& flag, int local_rank = 0);
  // The same from a flag's text (auto | cpu | cuda).
  static Runtime for_device(const std::string& device, const std::string& flag, int local_rank = 0);
  // Applies process-wide settings (current CUDA device, TF32, the attention backend's priority).
  // Call once before building.
  void activate() const;
  std::string describe() const;
};

// True when this build has CUDA and at least one GPU is visible (CUDA_VISIBLE_DEVICES applies).
bool cuda_available();
int cuda_device_count();
// A CUDA device's compute capability as major * 10 + minor (90 for 9.0), 0 for another device or
// a build without CUDA. Cheap: libtorch caches the device properties.
int cuda_capability(const c10::Device& device);
// Whether `device` has fp8 tensor cores (compute capability 8.9 or newer).
bool device_has_fp8(const c10::Device& device);
bool built_with_cuda();
// The GPU a rank with `local_rank` uses among `visible` GPUs: cuda:LOCAL_RANK, or cuda:0 when
// exactly one is visible (the launcher gave each process its own: srun --gpus-per-task=1, or
// CUDA_VISIBLE_DEVICES set per rank). -1 when the rank has none.
int cuda_index_for_local_rank(int local_rank, int visible);

// Autocast state for one device type while alive; the previous state comes back on exit, and the
// cast-weight cache is cleared on leaving the outermost enabled region (as torch.autocast does).
class AutocastScope {
 public:
  // Autocast of `rt.compute_dtype` on rt's device type; nothing at all for fp32.
  explicit AutocastScope(const Runtime& rt);
  // Exactly this state, enabled or not: re-enters a recorded one (activation checkpointing's
  // recompute runs under the forward's autocast state, whatever surrounds the backward).
  AutocastScope(c10::DeviceType type, bool enabled, at::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  void enter(c10::DeviceType type, bool enabled, at::ScalarType dtype);

  bool active_ = false;   // state was changed (and must be restored)
  bool enabled_ = false;  // autocast on inside: nesting counted
  c10::DeviceType type_ = c10::kCPU;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

// Peak bytes the caching allocator handed out on `device` since the last reset (0 on CPU),
// and the reset.
int64_t peak_device_memory(const c10::Device& device);
void reset_peak_device_memory(const c10::Device& device);

// Blocks until the device has finished queued work (timing, CUDA only).
void synchronize(const c10::Device& device);

}  // namespace lmtrain::core
