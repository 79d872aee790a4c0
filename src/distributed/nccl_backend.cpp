#include "distributed/nccl_backend.h"

#include "core/error.h"

#ifdef LMTRAIN_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#else
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace lmtrain::dist {

#ifdef LMTRAIN_NCCL

bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const c10::Device& device) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
  // Binding the device lets NCCL create its communicator eagerly and pick the right GPU for
  // barrier() (which has no tensor to tell it).
  pg->setBoundDeviceId(device);
  return pg;
}

#else

bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, std::chrono::milliseconds,
                                                    const c10::Device&) {
  throw Error("dist.backend=nccl: this lmtrain was built without NCCL");
}

#endif

}  // namespace lmtrain::dist
