// TORCH_DISTRIBUTED_DEBUG, the variable PyTorch's guides tell users to set, read the same way:
//   OFF (or unset)  nothing extra;
//   INFO            log the process group setup (backend, ranks, store, timeouts, the NCCL/CUDA
//                   variables in effect) and the gradient bucket layout;
//   DETAIL          INFO, plus one line per collective call (op, elements, dtype, bytes) from
//                   every rank, in each rank's log, and each step's gradient-bucket timeline
//                   (distributed/bucket_timeline.h).
// Other values are a UsageError naming the variable.
#pragma once
#include <string>

namespace lmtrain::dist {

enum class DebugLevel { kOff, kInfo, kDetail };

DebugLevel torch_distributed_debug();  // from the process environment
DebugLevel parse_debug_level(const std::string& value);

// "NCCL_DEBUG=WARN CUDA_VISIBLE_DEVICES=(unset) ...": the pass-through variables, for the INFO log.
std::string passthrough_env_summary();

}  // namespace lmtrain::dist
