// model.init_from under ZeRO-3's sharded set-up (parallel/sharded_init.h): each rank reads, of
// every trained tensor of the model, only the rows holding its shard's elements (by range, from
// an unsharded model.safetensors, e.g. `lmtrain import hf`'s, or from a sharded checkpoint's
// shard files: core/safetensors_slice.h, checkpoint/sharded_reader.h), one tensor at a time,
// and writes them into its flat shard; the model's buffers are read whole (small). No rank
// reads or holds the whole model. Parameters the file lacks, or of another shape, are errors
// naming the file and the tensor, as a whole load names them.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/training_checkpoint.h"
#include "model/gpt.h"
#include "optim/flat_params.h"

namespace lmtrain::train {

// `src`: loaded with tensors_by_range (no tensor file read). `flat`: ShardOnly-built over
// `model`; only the model's segments are written (an objective's keep their own values).
// LoRA adapters are not in a base: they keep their values (init_shard_from_seed's), unless
// `adapters` (a LoRA checkpoint resumed: its model.safetensors holds them).
// `experts`: under expert parallelism (flat keeps its expert region whole), the rows of each
// saved expert stack that are this rank's experts (train/expert_resume.h's ep_localizer; the
// file holds every expert, whole or as EP slices); empty: the stacks are read as the model
// holds them.
void load_init_shard(const LoadedCheckpoint& src, model::GptImpl& model, optim::FlatParams& flat,
                     bool adapters = false, const TensorLocalizer& experts = {});

// A LoRA base under the sharded set-up: the reader FullyShard's FrozenShard takes this rank's
// pieces of the frozen parameters from (elements [begin, + n) of a tensor of `src`'s
// model.safetensors, read by range when the shards are made), after checking that the file
// holds every frozen parameter at its shape; and the run's lora_base record (path, sha256).
// A sharded checkpoint is no LoRA base (as a whole load: it has no model.safetensors).
struct FrozenInit {
  std::function<void(const std::string&, int64_t, const at::Tensor&)> read;
  nlohmann::json lora_base;
};
FrozenInit frozen_init_source(const LoadedCheckpoint& src, const model::GptImpl& model);

// A temporal run's fresh sharded set-up (model.temporal.enabled: the LM frozen, the encoder
// trained as the objective's segments of `flat`): the LM `lm` (loaded with tensors_by_range)
// read as a LoRA base is, by range: the returned reader gives FullyShard this rank's pieces of
// the frozen parameters, and this rank's rows of whatever of the LM trains (lora.unfreeze) are
// read into the shard. Nothing of the LM is drawn: a whole build draws only what LoRA adds
// (`adapters`: drawn from `seed` after the base's draws, as build_model draws them). The
// encoder's segments are copied from the encoder. The CPU generator is left as it was (a
// whole build's, after the encoder's draws: checkpoints save it).
FrozenInit init_temporal_lm_shard(const LoadedCheckpoint& lm, model::GptImpl& model,
                                  optim::FlatParams& flat, bool adapters, uint64_t seed);

// ZeRO-3's sharded set-up resuming: of each saved parameter only the rows holding this rank's
// shard, one tensor at a time, as load_init_shard reads model.init_from, after the optimizer
// state of the same range, the RNG and the training state
// (checkpoint/training_checkpoint.h's restore_shard_optimizer_and_state, which refuses an
// objective's parameters first). The model is never written whole. A LoRA checkpoint: its
// base checked first (lora_checkpoint.h's checked_lora_base: there, with the recorded
// sha256), its adapters (and whatever else trained) read as above; the frozen base is left to
// FullyShard: `frozen` gets the reader of its pieces (frozen_init_source over that base) and
// the returned state its lora_base. Otherwise `frozen` is left empty. `experts`: under expert
// parallelism, this rank's experts (load_init_shard's; the moments of a sharded checkpoint are
// read through it too, as a whole resume reads them). `objective`: the module an objective
// trains beside the model (distillation's feature projections, flat's "objective.*" segments):
// its small objective.safetensors is read whole into it and this rank's part copied into the
// shard; null when flat holds the model's parameters only (else an Error, before any read).
TrainingState restore_training_shard(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                     optim::FlatParams& flat, optim::Optimizer& optimizer,
                                     FrozenInit& frozen, const TensorLocalizer& experts = {},
                                     torch::nn::Module* objective = nullptr);

}  // namespace lmtrain::train
