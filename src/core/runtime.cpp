#include "core/runtime.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

#ifdef LMTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::core {
namespace {

// Moves `choice` to the front of libtorch's SDPA priority order (the others keep their order
// behind it, as fallbacks for shapes it cannot run) and makes sure it is enabled.
[[maybe_unused]] void prefer_attention_backend(AttentionBackend choice) {
  at::SDPBackend wanted = at::SDPBackend::math;
  auto& ctx = at::globalContext();
  switch (choice) {
    case AttentionBackend::kFlash:
      wanted = at::SDPBackend::flash_attention;
      ctx.setSDPUseFlash(true);
      break;
    case AttentionBackend::kCudnn:
      wanted = at::SDPBackend::cudnn_attention;
      ctx.setSDPUseCuDNN(true);
      break;
    case AttentionBackend::kEfficient:
      wanted = at::SDPBackend::efficient_attention;
      ctx.setSDPUseMemEfficient(true);
      break;
    case AttentionBackend::kMath:
    case AttentionBackend::kAuto:
      ctx.setSDPUseMath(true);
      break;
  }
  std::vector<int64_t> order{static_cast<int64_t>(wanted)};
  for (at::SDPBackend b : ctx.sDPPriorityOrder())
    if (b != wanted) order.push_back(static_cast<int64_t>(b));
  ctx.setSDPPriorityOrder(order);
}

}  // namespace

int cuda_capability(const c10::Device& device) {
#ifdef LMTRAIN_CUDA
  if (device.is_cuda()) {
    const auto* p = at::cuda::getDeviceProperties(device.index());  // cached by libtorch
    return p->major * 10 + p->minor;
  }
#endif
  (void)device;
  return 0;
}

bool device_has_fp8(const c10::Device& device) { return cuda_capability(device) >= 89; }

bool built_with_cuda() {
#ifdef LMTRAIN_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
  return built_with_cuda() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

bool cuda_available() { return cuda_device_count() > 0; }

int cuda_index_for_local_rank(int local_rank, int visible) {
  if (local_rank < visible) return local_rank;
  return visible == 1 ? 0 : -1;
}

Runtime Runtime::for_device(const std::string& device, const std::string& flag, int local_rank) {
  return for_device(parse_choice<DeviceChoice>(device, flag), flag, local_rank);
}

Runtime Runtime::for_device(DeviceChoice device, const std::string& flag, int local_rank) {
  Runtime rt;
  // Exact fp32 for eval and generate (PyTorch's default too): their losses and greedy tokens
  // then match the CPU's. Training turns TF32 on with train.tf32 (cli::read_runtime).
  rt.tf32 = false;
  if (device == DeviceChoice::kCuda || (device == DeviceChoice::kAuto && cuda_available())) {
    if (!built_with_cuda()) {
      throw UsageError(flag +
                       "=cuda: this lmtrain was built against a libtorch without CUDA; rebuild "
                       "with scripts/build.sh against the venv's torch, or use " +
                       flag + "=cpu");
    }
    const int n = cuda_device_count();
    if (n == 0) {
      throw UsageError(flag +
                       "=cuda: no GPU is visible (torch sees 0 CUDA devices; check the driver "
                       "and CUDA_VISIBLE_DEVICES), or use " +
                       flag + "=cpu");
    }
    const int index = cuda_index_for_local_rank(local_rank, n);
    if (index < 0) {
      throw UsageError(log::format(
          "%s=cuda: local rank %d needs cuda:%d, but only %d GPU(s) are visible: start at most "
          "%d rank(s) per node",
          flag.c_str(), local_rank, local_rank, n, n));
    }
    rt.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return rt;
}

void Runtime::activate() const {
#ifdef LMTRAIN_CUDA
  if (cuda()) {
    c10::cuda::set_device(device.index());
    at::globalContext().setAllowTF32CuBLAS(tf32);
    at::globalContext().setAllowTF32CuDNN(tf32);
    if (attention != AttentionBackend::kAuto) prefer_attention_backend(attention);
  }
#endif
}

std::string Runtime::describe() const {
  std::string s = "runtime: " + device.str() + ", " + to_string(precision);
  if (autocast()) {
    s += std::string(" (fp32 master weights, ") + c10::toString(compute_dtype) + " compute";
    if (loss_scaling()) s += ", dynamic loss scaling";
    if (precision == Precision::kFp8) s += ", fp8 GEMMs in the blocks' linear layers";
    s += ")";
  }
  s += std::string(", gradients reduced in ") + c10::toString(reduce_dtype);
  if (cuda()) s += tf32 ? ", TF32 on" : ", TF32 off";
  if (cuda() && attention != AttentionBackend::kAuto) s += ", attention " + to_string(attention);
  if (fused_kernels != FusedKernels::kAuto) s += ", fused kernels " + to_string(fused_kernels);
  return s;
}

AutocastScope::AutocastScope(const Runtime& rt) {
  if (rt.autocast()) enter(rt.device.type(), true, rt.compute_dtype);
}

AutocastScope::AutocastScope(c10::DeviceType type, bool enabled, at::ScalarType dtype) {
  enter(type, enabled, dtype);
}

void AutocastScope::enter(c10::DeviceType type, bool enabled, at::ScalarType dtype) {
  active_ = true;
  enabled_ = enabled;
  type_ = type;
  prev_enabled_ = at::autocast::is_autocast_enabled(type_);
  prev_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, enabled);
  at::autocast::set_autocast_dtype(type_, dtype);
  if (enabled) at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (enabled_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, prev_enabled_);
  at::autocast::set_autocast_dtype(type_, prev_dtype_);
}

int64_t peak_device_memory(const c10::Device& device) {
#ifdef LMTRAIN_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_memory(const c10::Device& device) {
#ifdef LMTRAIN_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  (void)device;
}

void synchronize(const c10::Device& device) {
#ifdef LMTRAIN_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
  (void)device;
}

}  // namespace lmtrain::core
