// Reading Adam moments back from a checkpoint written by any AdamW variant at any world size:
//   {"kind": "named"}        one file with "exp_avg.<param>" / "exp_avg_sq.<param>" tensors
//                            (replicated AdamW; independent of the flat layout);
//   {"kind": "flat_shards"}  one file per rank with that rank's slice ("exp_avg",
//                            "exp_avg_sq") of the flat buffers, plus world_size, shard_numel
//                            and the flat layout signature (ZeRO); with "experts": "named"
//                            (ZeRO under expert parallelism) the shards cover the shared
//                            region and rank 0's file holds the experts' state by name.
// Both become full flat tensors over the current FlatParams layout, from which any optimizer
// takes the part it owns — which is what makes resuming at another world size work.
#pragma once
#include <utility>

#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::optim {

// (exp_avg, exp_avg_sq), each (flat.numel(),). Throws lmtrain::Error naming what is missing or
// inconsistent (tensor, shape, rank count, a different model layout).
std::pair<at::Tensor, at::Tensor> assemble_adam_state(const FlatParams& flat,
                                                      const std::vector<NamedTensors>& files,
                                                      const nlohmann::json& layout);

}  // namespace lmtrain::optim
