#include "kernels/kernel_switch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace lmtrain::kernels {
namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("LMTRAIN_FUSED_KERNELS");
    return !(env && std::strcmp(env, "0") == 0);
  }()};
  return enabled;
}

}  // namespace

bool fused_cpu_kernels_enabled() { return enabled_flag().load(std::memory_order_relaxed); }

void set_fused_cpu_kernels_enabled(bool on) { enabled_flag() = on; }

}  // namespace lmtrain::kernels
