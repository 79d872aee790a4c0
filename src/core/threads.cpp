#include "core/threads.h"

#include <algorithm>
#include <thread>

namespace lmtrain::core {

int configure_threads(int configured, int local_world_size) {
  int n = configured;
  if (n <= 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n = std::max(1, cores / std::max(1, local_world_size));
  }
  torch::set_num_threads(n);
  return n;
}

}  // namespace lmtrain::core
