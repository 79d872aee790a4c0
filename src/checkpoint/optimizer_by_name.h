// The optimizer state of a checkpoint saved without shards (its model.safetensors whole), by
// parameter name and whole, whatever layout saved it, for a run that cuts it into its own pieces
// (tensor parallelism, dist.tp > 1: "a checkpoint saved under any layout loads under any other"):
//   "named"        replicated AdamW: optim.rank0's "exp_avg.<p>", "exp_avg_sq.<p>" as they are;
//   "muon"         Muon (DistMuon over W ranks): the W rank files merged, "momentum.<matrix>"
//                  from its owner's, "exp_avg.<p>" / "exp_avg_sq.<p>" of the AdamW group;
//   "flat_shards"  ZeRO-1/2 over W ranks: rank r's file holds elements [r S, (r+1) S) of the
//                  flat moments (S: shard_numel) in one process's flat layout; each parameter's
//                  whole moments are cut out of the ranges that cover its segment. That layout
//                  is rebuilt from `model`'s parameter order (FlatParams': trainable parameters,
//                  reverse registration order) and the checkpoint's whole shapes, and must have
//                  the saved signature ("flat_layout"), else the model differs: an Error.
// The CPU RNG state is not among them.
#pragma once
#include "checkpoint/checkpoint_store.h"
#include "model/gpt.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

optim::NamedTensors whole_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model);

}  // namespace lmtrain::train
