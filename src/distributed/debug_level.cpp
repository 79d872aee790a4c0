#include "distributed/debug_level.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace lmtrain::dist {

DebugLevel parse_debug_level(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), ::toupper);
  if (v.empty() || v == "OFF") return DebugLevel::kOff;
  if (v == "INFO") return DebugLevel::kInfo;
  if (v == "DETAIL") return DebugLevel::kDetail;
  throw UsageError("environment variable TORCH_DISTRIBUTED_DEBUG='" + value +
                   "': expected OFF, INFO or DETAIL");
}

DebugLevel torch_distributed_debug() {
  const char* v = std::getenv("TORCH_DISTRIBUTED_DEBUG");
  return v ? parse_debug_level(v) : DebugLevel::kOff;
}

std::string passthrough_env_summary() {
  // Read by NCCL, the CUDA runtime and libtorch's CUDA allocator themselves; lmtrain (and
  // `lmtrain launch`, which passes its environment to every rank) leaves them as they are.
  std::string out;
  for (const char* var : {"NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF"}) {
    const char* v = std::getenv(var);
    out += (out.empty() ? "" : " ") + std::string(var) + "=" + (v ? v : "(unset)");
  }
  return out;
}

}  // namespace lmtrain::dist
