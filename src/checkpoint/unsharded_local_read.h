// A tensor-parallel run (dist.tp > 1) resuming from a checkpoint saved without shards (its
// model.safetensors whole): this rank's part of each tensor, read by range from the files
// (core/safetensors_slice.h, read_local_rows) instead of loading them whole ("a checkpoint saved
// under any layout loads under any other"). The optimizer state, whatever layout saved it:
//   "named"        replicated AdamW: optim.rank0's "exp_avg.<p>", "exp_avg_sq.<p>";
//   "muon"         Muon (DistMuon over W ranks): the W rank files' tensors, "momentum.<matrix>"
//                  from its owner's, "exp_avg.<p>" / "exp_avg_sq.<p>" of the AdamW group;
//   "flat_shards"  ZeRO-1/2 over W ranks: rank r's file holds elements [r S, (r+1) S) of the
//                  flat moments (S: shard_numel) in one process's flat layout; each parameter's
//                  part is read from the ranges that cover it. That layout is rebuilt from
//                  `model`'s parameter order (FlatParams': trainable parameters, reverse
//                  registration order) and the checkpoint's whole shapes, and must have the
//                  saved signature ("flat_layout"), else the model differs: an Error.
// The CPU RNG state is not among them.
#pragma once
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "model/gpt.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

// This rank's part of every tensor of the checkpoint's model.safetensors, by name.
core::SafetensorsFile local_model_tensors(const LoadedCheckpoint& ckpt,
                                          const TensorLocalizer& local);

// This rank's part of the optimizer state, by name ("<state>.<parameter>").
optim::NamedTensors local_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& local);

}  // namespace lmtrain::train
