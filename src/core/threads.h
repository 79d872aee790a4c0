// Intra-op thread count: libtorch starts with 1 thread here, so set it deliberately.
#pragma once

namespace lmtrain::core {

// configured > 0 wins; otherwise cores / local ranks (at least 1). Applies it to libtorch
// (intra-op; inter-op stays at 1) and returns it.
int configure_threads(int configured, int local_world_size);

}  // namespace lmtrain::core
