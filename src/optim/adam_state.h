// Reading Adam moments back from a checkpoint written by any AdamW variant at any world size:
//   {"kind": "named"}        one file with "exp_avg.<param>" / "exp_avg_sq.<param>" tensors
//                            (replicated AdamW; independent of the flat layout);
//   {"kind": "flat_shards"}  one file per rank with that rank's slice ("exp_avg",
//                            "exp_avg_sq") of the flat buffers, plus world_size, shard_numel
//                            and the flat layout signature (ZeRO); with "experts": "named"
//                            (ZeRO under expert parallelism) the shards cover the shared
//                            region and rank 0's file holds the experts' state by name.
// Both map onto the current FlatParams layout, whatever world size saved them, and an optimizer
// asks for the flat range it keeps (ZeRO: its shard, its experts; replicated: all of it): only
// the saved elements overlapping that range are read (optim/saved_tensors.h), so a ZeRO resume
// holds this rank's shard of the moments, never the whole model's.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include "optim/flat_params.h"
#include "optim/saved_tensors.h"

namespace lmtrain::optim {

// Fills m and v, (n,) views of an optimizer's moment buffers (any device), with the saved
// exp_avg / exp_avg_sq at elements [begin, begin + n) of `flat`'s layout; alignment padding
// gets 0. Every tensor the layout needs is checked (present, shape, rank count, the same model
// layout) from the files' headers whatever the range, so all ranks reach the same verdict;
// throws lmtrain::Error naming what is missing or inconsistent.
void read_adam_range(const FlatParams& flat, const SavedTensors& saved,
                     const nlohmann::json& layout, int64_t begin, at::Tensor m, at::Tensor v);

}  // namespace lmtrain::optim
