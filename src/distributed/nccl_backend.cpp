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
  // Bound to its device, the group knows its GPU for barrier() (which has no tensor to tell
  // it); connecting now, as torch.distributed does when given a device_id, makes the NCCL
  // communicator while every member is in this call (group creation), not lazily inside the
  // first collective, whose ranks may arrive far apart and whose init no watchdog covers.
  pg->setBoundDeviceId(device);
  pg->eagerConnectSingleDevice(device);
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
