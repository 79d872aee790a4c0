#include "train/temporal_setup.h"

#include <torch/torch.h>

#include <filesystem>

#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parse_int.h"
#include "core/safetensors.h"
#include "core/safetensors_slice.h"
#include "core/text_list.h"
#include "data/temporal/generator.h"
#include "data/temporal/temporal_cache.h"
#include "model/temporal/temporal_encoder.h"

namespace lmtrain::train {

namespace dt = data::temporal;

LoadedCheckpoint temporal_lm_checkpoint(const std::string& init_from) {
  if (init_from.empty()) {
    throw UsageError(
        "model.temporal.enabled trains a time-series encoder for a frozen LM: set "
        "model.init_from to an lmtrain checkpoint or an `lmtrain import hf` directory");
  }
  auto dir = CheckpointStore::resolve(init_from, init_from);
  if (!dir) throw UsageError("model.init_from = '" + init_from + "': no checkpoint there");
  auto lm = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"},
                                  /*tensors_by_range=*/true);
  refuse_lora_init_source(lm);
  if (!lm.meta.value("files", nlohmann::json::object()).contains("model.safetensors")) {
    throw Error("checkpoint " + lm.dir + " has no model.safetensors in its meta.json");
  }
  if (!std::filesystem::exists(lm.dir + "/tokenizer.json")) {
    throw UsageError("model.init_from = " + lm.dir +
                     " has no tokenizer.json: a temporal run writes its prompts with the LM's "
                     "own tokenizer (import the model with its tokenizer)");
  }
  return lm;
}

void read_temporal_lm_tensors(LoadedCheckpoint& lm) {
  lm.files.emplace("model.safetensors", core::read_safetensors(lm.dir + "/model.safetensors"));
}

double temporal_lm_embedding_rms(const LoadedCheckpoint& lm) {
  const std::string path = lm.dir + "/model.safetensors", name = "transformer.wte.weight";
  for (const auto& e : core::read_safetensors_header(path).entries) {
    if (e.name != name) continue;
    if (e.shape.size() != 2) throw Error(path + ": tensor '" + name + "' is not 2-d");
    const int64_t width = e.shape[1];
    return model::temporal::token_embedding_rms(e.shape[0], width, [&](int64_t first, int64_t n) {
      // As a whole load sees it: the file's values in the model's fp32.
      return core::read_safetensors_slice(path, name, first * width, n * width).to(torch::kFloat);
    });
  }
  throw Error(path + " has no tensor '" + name + "'");
}

model::temporal::TemporalEncoderOptions encoder_for_lm(
    model::temporal::TemporalEncoderOptions encoder, const model::GptConfig& lm) {
  encoder.lm_width = lm.n_embd;
  encoder.lm_vocab = lm.vocab_size;
  model::temporal::check_temporal_options(encoder);
  return encoder;
}

TemporalSampleSource temporal_sample_source(const TemporalSampleOptions& temporal,
                                            const model::temporal::TemporalEncoderOptions& encoder,
                                            std::string* origin) {
  TemporalSampleSource source;
  const std::string& dir = temporal.dir;
  if (temporal.online) {
    if (!dir.empty()) {
      throw UsageError("data.temporal.online = true generates the samples, data.temporal.dir = " +
                       dir + " reads them: set one of the two");
    }
    dt::GeneratorOptions g;
    g.seed = static_cast<uint64_t>(temporal.seed);
    g.channels = encoder.channels;
    g.lengths.clear();
    for (const auto& piece : core::split_list(temporal.lengths)) {
      const auto n = core::parse_nonnegative_int(piece, int64_t{1} << 30);
      if (!n || *n < 1) {
        throw UsageError("config key 'data.temporal.lengths' = '" + temporal.lengths +
                         "': expected positive lengths separated by commas");
      }
      g.lengths.push_back(*n);
    }
    // Unset (the default): every task, as temporal-data without --tasks.
    if (!temporal.tasks.empty()) g.tasks = core::split_list(temporal.tasks);
    dt::check_generator_options(g);
    source.size = temporal.num_samples;
    source.max_series = 1;
    source.get = [g](int64_t i) { return dt::generate_sample(g, i); };
    *origin = log::format("the online generator (seed %llu)", (unsigned long long)g.seed);
    return source;
  }
  if (dir.empty()) {
    throw UsageError(
        "model.temporal.enabled needs samples: set data.temporal.dir (a directory of `lmtrain "
        "temporal-data` or ChatTS JSONL files) or data.temporal.online = true");
  }
  dt::ReadOptions read;
  read.max_length = encoder.max_length;
  read.channels = encoder.channels;
  auto samples =
      std::make_shared<std::vector<dt::TemporalSample>>(dt::read_temporal_dir(dir, read));
  source.size = static_cast<int64_t>(samples->size());
  for (const auto& s : *samples) {
    source.max_series = std::max<int64_t>(source.max_series, static_cast<int64_t>(s.series.size()));
  }
  source.get = [samples](int64_t i) { return samples->at(static_cast<size_t>(i)); };
  *origin = dir;
  return source;
}

std::unique_ptr<TemporalData> make_temporal_data(
    const DataOptions& data, const model::temporal::TemporalEncoderOptions& encoder,
    data::BpeTokenizer tokenizer, uint64_t seed) {
  std::string origin;
  auto source = temporal_sample_source(data.temporal, encoder, &origin);
  TemporalBatchShape shape;
  shape.seq_len = data.seq_len;
  shape.max_series = source.max_series;
  shape.encoder = encoder;
  return std::make_unique<TemporalData>(std::move(source), std::move(tokenizer), shape,
                                        data.temporal.val_fraction, seed, data.shuffle, origin);
}

std::shared_ptr<TemporalAlignmentObjective> make_temporal_objective(
    const model::temporal::TemporalEncoderOptions& options, model::GptImpl& lm, double lm_rms,
    const core::Runtime& rt, uint64_t seed) {
  torch::manual_seed(seed);
  model::temporal::TemporalEncoder encoder(options, /*init=*/true);
  encoder->set_output_rms(lm_rms);
  encoder->set_vocab_table(lm.transformer->wte->weight);
  if (rt.device != c10::Device(c10::kCPU) || rt.param_dtype != at::kFloat) {
    encoder->to(rt.device, rt.param_dtype);
  }
  return std::make_shared<TemporalAlignmentObjective>(std::move(encoder));
}

TemporalInference load_temporal_inference(const std::string& spec, const core::Runtime& rt) {
  TemporalInference out;
  // The encoder's tensors are read (and the checkpoint verified) in the same load as the LM's.
  out.lm = load_inference_model(spec, rt, {"objective.safetensors"});
  if (!out.lm.temporal) {
    throw UsageError("checkpoint " + out.lm.checkpoint_dir +
                     " is not a temporal-encoder run's (model.temporal.enabled is false)");
  }
  if (!out.lm.tokenizer) {
    throw UsageError("checkpoint " + out.lm.checkpoint_dir + " has no tokenizer.json");
  }
  LoadedCheckpoint ckpt;
  ckpt.dir = out.lm.checkpoint_dir;
  ckpt.files = std::move(out.lm.extra_files);
  out.encoder = model::temporal::TemporalEncoder(
      encoder_for_lm(out.lm.encoder, out.lm.model->config()), /*init=*/false);
  load_objective_tensors(ckpt, *out.encoder);
  if (rt.device != c10::Device(c10::kCPU) || rt.param_dtype != at::kFloat) {
    out.encoder->to(rt.device, rt.param_dtype);
  }
  out.encoder->set_vocab_table(out.lm.model->transformer->wte->weight);
  out.encoder->eval();
  return out;
}

}  // namespace lmtrain::train
