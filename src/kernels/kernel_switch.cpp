#include "kernels/kernel_switch.h"

#include <cstdlib>
#include <cstring>

namespace lmtrain::kernels {

bool fused_cpu_kernels_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("LMTRAIN_FUSED_KERNELS");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return enabled;
}

}  // namespace lmtrain::kernels
