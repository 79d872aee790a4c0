// Collectives in flight whose results are not in place yet: one ZeRO-3 unit's gather or
// reduce-scatter (parallel/fully_shard.h, parallel/frozen_shard.h). A piece that travels in a
// narrower dtype (bf16 gathers, train.grad_reduce_dtype) lands in a wire copy; once every
// collective has ended, each wire copy is copied, widened, into its place. What the collectives
// read from (lowered copies of this rank's pieces) stays alive until then.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "distributed/group.h"

namespace lmtrain::parallel {

struct InFlight {
  std::vector<std::shared_ptr<dist::Work>> works;
  std::vector<at::Tensor> sources;                       // read by the works: kept alive
  std::vector<std::pair<at::Tensor, at::Tensor>> widen;  // (wire copy, its place)

  // Waits for every collective, then puts each wire copy in its place; empty afterwards.
  void finish() {
    for (auto& w : works) w->wait();
    works.clear();
    sources.clear();
    torch::NoGradGuard no_grad;
    for (auto& [wire, place] : widen) place.copy_(wire);
    widen.clear();
  }

  // For destructors after a step that threw: the buffers the collectives write must outlive
  // them, and the step's error is already on its way (a second one here is not reported).
  void wait_quietly() noexcept {
    for (auto& w : works) {
      try {
        w->wait();
      } catch (const std::exception&) {
      }
    }
  }
};

}  // namespace lmtrain::parallel
