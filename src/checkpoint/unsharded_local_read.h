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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "model/gpt.h"
#include "optim/optimizer.h"
#include "optim/saved_tensors.h"

namespace lmtrain::train {

// This rank's part of each tensor of the checkpoint's model.safetensors, by name, read when
// asked (load_model_tensors_from): one tensor's part held beside the model at a time.
TensorByName local_model_reader(const LoadedCheckpoint& ckpt, const TensorLocalizer& local);

// One tensor of the optimizer state, this rank's part of it: its name ("<state>.<parameter>"),
// local shape, and the read of it by range from the files (when called).
struct LocalStateEntry {
  std::string name;
  std::vector<int64_t> shape;
  std::function<at::Tensor()> read;
};
// Every tensor of the optimizer state, not yet read (the files' headers are, and checked).
std::vector<LocalStateEntry> local_optimizer_entries(const LoadedCheckpoint& ckpt,
                                                     model::GptImpl& model,
                                                     const TensorLocalizer& local);

// This rank's part of the optimizer state, by name ("<state>.<parameter>"), all read (Muon's
// load_state takes it so).
optim::NamedTensors local_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& local);

// The same Adam moments as optim::SavedTensors in the "named" layout (optim/adam_state.h), each
// tensor's part read when the optimizer first asks for it and dropped at the next one: an
// AdamW or ZeRO optimizer reads them straight into its moment buffers
// (Optimizer::load_saved_state), holding one tensor's part beside them, not all of them.
std::unique_ptr<optim::SavedTensors> local_adam_moments(const LoadedCheckpoint& ckpt,
                                                        model::GptImpl& model,
                                                        const TensorLocalizer& local);

}  // namespace lmtrain::train
