// glibc malloc hands every allocation above 128 KiB straight to mmap and returns it to the
// kernel on free. A training step allocates and frees the same large activations (logits are
// B*T*V floats) every step, so each step pays page faults and page clearing for all of them
// (~10% of a small model's step time, measured with perf). Raising the mmap and trim
// thresholds keeps that memory in the heap for reuse, as a caching allocator would.
#pragma once

namespace lmtrain::core {

void tune_malloc_for_training();

}  // namespace lmtrain::core
