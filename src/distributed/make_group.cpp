// make_group: a world of one gets the single-rank group; several ranks meet at the TCPStore
// (distributed/rendezvous.h) and build a c10d process group over it: Gloo for CPU tensors, NCCL
// for GPU ones with a Gloo companion for CPU tensors (distributed/c10d_group.cpp).
#include <chrono>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "core/error.h"
#include "core/log.h"
#include "distributed/c10d_backends.h"
#include "distributed/c10d_error.h"
#include "distributed/debug_level.h"
#include "distributed/nccl_backend.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"

namespace lmtrain::dist {
namespace {

using Ms = std::chrono::milliseconds;

Ms to_ms(double seconds) { return Ms(static_cast<int64_t>(seconds * 1000.0)); }

std::shared_ptr<::gloo::transport::Device> gloo_device(const DistEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  return c10d::ProcessGroupGloo::createDeviceForHostname(
      local_address_towards(env.master_addr, env.master_port));
}

}  // namespace

std::unique_ptr<Group> make_group(const DistEnv& env, const GroupOptions& options) {
  BackendChoice backend = options.backend;
  if (backend == BackendChoice::kAuto) {
    backend = options.cuda ? BackendChoice::kNccl : BackendChoice::kGloo;
  }
  // A world of one needs no process group, unless NCCL was asked for by name: then a real one of
  // one rank (a single GPU runs the NCCL code path; under a launcher for its MASTER_PORT).
  if (!env.distributed() && options.backend != BackendChoice::kNccl) {
    return make_single_rank_group();
  }
  if (backend == BackendChoice::kNccl) {
    if (!nccl_available()) {
      throw UsageError(
          "dist.backend=nccl: this lmtrain was built against a libtorch without CUDA/NCCL; use "
          "dist.backend=gloo");
    }
    if (!options.cuda) {
      throw UsageError(
          "dist.backend=nccl needs the tensors on GPUs, but train.device resolved to cpu: use "
          "dist.backend=gloo (or auto) on CPU, or train.device=cuda");
    }
  }
  auto rdzv = rendezvous(env, to_ms(options.init_timeout_s));
  const auto timeout = to_ms(options.timeout_s);
  auto gloo = [timeout, device = gloo_device(env)](const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int size) {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(device);
    // Two Gloo threads: one bucket can be reduced while the next one is sent.
    opts->threads = 2;
    return c10::intrusive_ptr<c10d::Backend>(
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts));
  };
  BackendFactory factory;
  if (backend == BackendChoice::kNccl) {
    factory = [timeout, device = options.device, gloo](const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size) {
      Backends b;
      b.main = make_nccl_backend(store, rank, size, timeout, device);
      // Its own key space in the store: NCCL's and Gloo's rendezvous keys must not meet.
      b.host = gloo(c10::make_intrusive<c10d::PrefixStore>("host/", store), rank, size);
      return b;
    };
  } else {
    factory = [gloo](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
      return Backends{gloo(store, rank, size), nullptr};
    };
  }
  try {
    auto backends = factory(rdzv.store, env.rank, env.world_size);
    if (torch_distributed_debug() != DebugLevel::kOff) {
      log::info(log::format(
          "TORCH_DISTRIBUTED_DEBUG: rank %d of %d: %s process group%s over the TCPStore at "
          "%s:%d (init timeout %.0f s, collective timeout %.0f s); %s",
          env.rank, env.world_size, core::to_string(backend).c_str(),
          backends.host ? " (and Gloo for CPU tensors)" : "", env.master_addr.c_str(),
          env.master_port, options.init_timeout_s, options.timeout_s,
          passthrough_env_summary().c_str()));
    }
    return make_c10d_group(std::move(backends), backend, env.rank, env.world_size, rdzv.store,
                           factory, options.device);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(log::format("rank %d: building the %s process group failed: %s", env.rank,
                            core::to_string(backend).c_str(), brief_error(e).c_str()));
  }
}

}  // namespace lmtrain::dist
