#include "core/malloc_tuning.h"

#include <malloc.h>

namespace lmtrain::core {

void tune_malloc_for_training() {
  // 1 GiB: tensors up to this size come from the heap and are reused across steps.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  // Keep up to 2 GiB of freed memory at the top of the heap instead of returning it.
  mallopt(M_TRIM_THRESHOLD, 0x7fffffff);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace lmtrain::core
