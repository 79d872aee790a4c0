// The c10d process group behind dist::Group (distributed/c10d_group.cpp), as make_group
// (distributed/make_group.cpp) builds it: its backends and how a sub-group makes its own.
#pragma once
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/group.h"
#include "distributed/process_group.h"

namespace lmtrain::dist {

// The backends of one (sub)group: `main` takes the run's tensors; `host` (NCCL groups only,
// else null) takes CPU tensors.
struct Backends {
  c10::intrusive_ptr<c10d::Backend> main, host;
};

// Makes the backends of a (sub)group over `store`.
using BackendFactory =
    std::function<Backends(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)>;

// The Group over `backends` for `rank` of `size` (kind: gloo or nccl, never auto); its split()
// makes each sub-group's backends with `factory` over a prefix of `store`.
std::unique_ptr<Group> make_c10d_group(Backends backends, BackendChoice kind, int rank, int size,
                                       c10::intrusive_ptr<c10d::Store> store,
                                       BackendFactory factory, c10::Device device);

}  // namespace lmtrain::dist
