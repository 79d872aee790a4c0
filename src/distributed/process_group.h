// Builds the dist::Group for this process from its environment (distributed/env.h): the single-rank
// group for a world of one, else a c10d process group (Gloo on CPU, NCCL in CUDA builds) after a
// checked TCPStore rendezvous (distributed/rendezvous.h).
#pragma once
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "core/config_choice.h"
#include "distributed/env.h"
#include "distributed/group.h"

namespace lmtrain::dist {

// dist.backend, in the order of its choices (core/config_choice.h). auto: nccl for CUDA tensors,
// gloo for CPU ones.
enum class BackendChoice { kAuto, kGloo, kNccl };
constexpr core::ChoiceKey choice_key(BackendChoice) { return {"dist.backend", 3}; }

// dist.backend, dist.init_timeout_s, dist.timeout_s (read by the command, cli/dist_setup.cpp).
struct GroupOptions {
  BackendChoice backend = BackendChoice::kAuto;
  double init_timeout_s = 120;    // rendezvous
  double timeout_s = 600;         // any one collective
  bool cuda = false;              // tensors live on the GPU (auto picks nccl)
  c10::Device device{c10::kCPU};  // this rank's device (NCCL binds the group to it)
};

std::unique_ptr<Group> make_group(const DistEnv& env, const GroupOptions& options);

}  // namespace lmtrain::dist
