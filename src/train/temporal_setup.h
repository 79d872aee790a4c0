// Setting up a temporal-encoder run (model.temporal.enabled, issue 26) from its config: the
// frozen LM it aligns to (model.init_from, whose shape and tokenizer the run adopts), the
// encoder's options, the samples and the objective.
#pragma once
#include <memory>
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/checkpoint_store.h"
#include "core/runtime.h"
#include "data/bpe_tokenizer.h"
#include "model/gpt.h"
#include "model/temporal/temporal_options.h"
#include "objective/temporal_objective.h"
#include "train/data_options.h"
#include "train/temporal_data.h"

namespace lmtrain::train {

// model.init_from's checkpoint (`init_from`; verified, meta.json only: no tensor file read):
// the LM a temporal run aligns to. UsageErrors name what is missing (no init_from, a LoRA
// checkpoint, no tokenizer.json); an Error a checkpoint without one model.safetensors (a
// sharded one: the frozen LM is recorded as a LoRA base is, by that file's sha256).
LoadedCheckpoint temporal_lm_checkpoint(const std::string& init_from);

// The LM's model.safetensors read whole into `lm` (a run that builds the whole model loads the
// frozen LM from it; ZeRO-3's sharded set-up reads it by range instead).
void read_temporal_lm_tensors(LoadedCheckpoint& lm);

// The RMS of the LM's token embeddings (model::temporal::token_embedding_rms), read by range
// from `lm`'s model.safetensors a block of rows at a time: what the whole table gives.
double temporal_lm_embedding_rms(const LoadedCheckpoint& lm);

// `encoder` for the decoder `lm`: lm_width its n_embd, lm_vocab its vocab_size. Throws
// UsageError naming a bad key.
model::temporal::TemporalEncoderOptions encoder_for_lm(
    model::temporal::TemporalEncoderOptions encoder, const model::GptConfig& lm);

// The samples of data.temporal.dir, or the generator's (data.temporal.online); series of
// encoder.channels variables, at most encoder.max_length long.
TemporalSampleSource temporal_sample_source(const TemporalSampleOptions& temporal,
                                            const model::temporal::TemporalEncoderOptions& encoder,
                                            std::string* origin);

// The run's data: samples, the LM's tokenizer, rows of data.seq_len tokens; encoder: the
// encoder's options for the LM (encoder_for_lm); seed: train.seed.
std::unique_ptr<TemporalData> make_temporal_data(
    const DataOptions& data, const model::temporal::TemporalEncoderOptions& encoder,
    data::BpeTokenizer tokenizer, uint64_t seed);

// A freshly initialised encoder (from `seed`, whatever the LM's init drew) whose soft tokens
// start at `lm_rms`, the RMS of the LM's token embeddings, on rt's device, as the run's
// objective; a vocab_mix projector mixes `lm`'s wte (by reference: under ZeRO-3 its gathered
// values).
std::shared_ptr<TemporalAlignmentObjective> make_temporal_objective(
    const model::temporal::TemporalEncoderOptions& options, model::GptImpl& lm, double lm_rms,
    const core::Runtime& rt, uint64_t seed);

// A temporal run's checkpoint for inference (generate, eval): the frozen LM with the run's
// tokenizer and config (checkpoint_model.h: the LM comes from the recorded base, hash checked)
// and the trained encoder from objective.safetensors, both in eval mode on rt's device.
struct TemporalInference {
  InferenceModel lm;
  model::temporal::TemporalEncoder encoder{nullptr};
};
TemporalInference load_temporal_inference(const std::string& spec, const core::Runtime& rt);

}  // namespace lmtrain::train
