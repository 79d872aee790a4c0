// ProcessGroupNCCL, in its own translation unit: only CUDA builds compile it (it needs CUDA and
// NCCL headers), the rest of distributed/ sees this plain interface.
#pragma once
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace lmtrain::dist {

// True in builds whose libtorch has NCCL.
bool nccl_available();

// A ProcessGroupNCCL of `size` ranks over `store`, bound to `device` (this rank's GPU). Any
// collective that takes longer than `timeout` is aborted by NCCL's watchdog with an error
// naming the rank and the operation. Throws lmtrain::Error where NCCL is not built in.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const c10::Device& device);

}  // namespace lmtrain::dist
