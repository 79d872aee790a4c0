#include "train/init_from_shard.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/sharded_reader.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "core/safetensors_slice.h"
#include "parallel/sharded_init.h"

namespace lmtrain::train {
namespace {

// The rows of a segment of whole shape seg.shape that cover this rank's held elements: dim 0
// cut to [r0, r1) ([0, 0): none held); a 0-dim parameter is read whole.
LocalRows init_shard_rows(const optim::FlatParams& flat, const optim::ParamSegment& seg) {
  if (seg.shape.empty() || seg.shape[0] == 0) return LocalRows{};
  const int64_t inner = seg.numel / seg.shape[0];
  const auto [a, b] = parallel::held_part(flat, seg);
  LocalRows rows{0, {{0, 0}}, seg.shape};
  if (a < b) rows.ranges = {{a / inner, (b + inner - 1) / inner}};
  return rows;
}

}  // namespace

void load_init_shard(const LoadedCheckpoint& src, model::GptImpl& model, optim::FlatParams& flat,
                     bool adapters, const TensorLocalizer& experts) {
  const std::string origin = src.dir + "/model.safetensors";
  const auto& segs = flat.segments();
  const auto& tags = model.param_tags();
  std::map<std::string, size_t> segment_of;  // the model's own segments
  for (size_t i = 0; i < segs.size(); ++i) {
    auto tag = tags.find(segs[i].name);
    if (tag != tags.end() && (adapters || !tag->second.lora)) segment_of.emplace(segs[i].name, i);
  }
  std::map<std::string, at::Tensor> buffers;
  for (const auto& item : model.named_buffers(/*recurse=*/true)) buffers[item.key()] = item.value();
  std::set<std::string> seen;
  TensorLocalizer local;
  local.cut = [](const std::string&, const at::Tensor& whole) { return whole; };
  // An expert stack under expert parallelism: this rank's experts' rows of the saved stack
  // (all of them kept, flat.experts_kept()); anything else: the rows holding its shard.
  local.rows = [&](const std::string& name) {
    auto it = segment_of.find(name);
    if (it == segment_of.end()) return LocalRows{};
    if (segs[it->second].expert && experts) return experts.rows(name);
    return init_shard_rows(flat, segs[it->second]);
  };
  local.ep_rank = experts.ep_rank;
  local.ep = experts.ep;
  torch::NoGradGuard no_grad;
  // One tensor of the file: `read` gives this rank's rows of it (or, for a buffer, all of it).
  auto take = [&](const std::string& name, const std::vector<int64_t>& shape,
                  const std::function<at::Tensor()>& read) {
    auto it = segment_of.find(name);
    auto buf = buffers.find(name);
    if (it == segment_of.end() && buf == buffers.end()) return;  // not the model's: not read
    // (An expert stack is saved with every expert: the whole shape its rows are cut from.)
    const bool stack = it != segment_of.end() && segs[it->second].expert && experts;
    const std::vector<int64_t> want =
        it == segment_of.end() ? buf->second.sizes().vec()
                               : (stack ? experts.rows(name).whole_shape : segs[it->second].shape);
    if (shape != want) {
      throw Error(log::format("%s: tensor '%s' has shape %s, the model expects %s", origin.c_str(),
                              name.c_str(), c10::str(at::IntArrayRef(shape)).c_str(),
                              c10::str(at::IntArrayRef(want)).c_str()));
    }
    const at::Tensor got = read();
    if (it == segment_of.end()) {
      buf->second.copy_(got);
    } else {
      const auto& seg = segs[it->second];
      const LocalRows rows = local.rows(name);
      // Rows [r0, r1) of the tensor, or the whole tensor where the reader gave it whole.
      const int64_t first = got.numel() == seg.numel || rows.dim < 0
                                ? 0
                                : rows.ranges.front().first * (seg.numel / seg.shape[0]);
      parallel::write_segment_part(flat, seg, first, got);
    }
    seen.insert(name);
  };
  if (has_model_shards(src.meta)) {
    for (const auto& t : model_shards_of(src.meta).at("tensors")) {
      if (t.at("in").get<std::string>() != "model.safetensors") continue;
      const std::string name = t.at("name").get<std::string>();
      take(name, t.at("shape").get<std::vector<int64_t>>(), [&]() {
        if (t.contains("flat") || t.contains("slices")) {
          return read_local_shard_entry(src.dir, src.meta, t, "params", name, local);
        }
        return core::read_safetensors_slice(src.dir + "/" + t.at("file").get<std::string>(), name);
      });
    }
  } else {
    for (const auto& e : core::read_safetensors_header(origin).entries) {
      take(e.name, e.shape, [&]() {
        return read_local_rows(e.shape, local.rows(e.name), [&](int64_t b, int64_t n) {
          return core::read_safetensors_slice(origin, e.name, b, n);
        });
      });
    }
  }
  for (const auto& [name, i] : segment_of) {
    if (!seen.count(name)) throw Error(origin + " has no tensor '" + name + "'");
  }
  for (const auto& [name, b] : buffers) {
    if (!seen.count(name)) throw Error(origin + " has no tensor '" + name + "'");
  }
}

FrozenInit frozen_init_source(const LoadedCheckpoint& src, const model::GptImpl& model) {
  const auto& files = src.meta.value("files", nlohmann::json::object());
  if (!files.contains("model.safetensors")) {
    throw Error("checkpoint " + src.dir + " has no model.safetensors in its meta.json");
  }
  const std::string origin = src.dir + "/model.safetensors";
  std::map<std::string, std::vector<int64_t>> saved;
  for (const auto& e : core::read_safetensors_header(origin).entries) saved[e.name] = e.shape;
  const auto& tags = model.param_tags();
  for (const auto& item : model.named_parameters()) {
    auto tag = tags.find(item.key());
    if (tag == tags.end() || tag->second.trainable) continue;
    auto it = saved.find(item.key());
    if (it == saved.end()) throw Error(origin + " has no tensor '" + item.key() + "'");
    if (at::IntArrayRef(it->second) != item.value().sizes()) {
      throw Error(log::format("%s: tensor '%s' has shape %s, the model expects %s", origin.c_str(),
                              item.key().c_str(), c10::str(at::IntArrayRef(it->second)).c_str(),
                              c10::str(item.value().sizes()).c_str()));
    }
  }
  FrozenInit out;
  out.read = [origin](const std::string& name, int64_t begin, const at::Tensor& dest) {
    torch::NoGradGuard no_grad;
    dest.copy_(core::read_safetensors_slice(origin, name, begin, dest.numel()));
  };
  out.lora_base = {{"path", std::filesystem::canonical(src.dir).string()},
                   {"sha256", files["model.safetensors"].at("sha256").get<std::string>()}};
  return out;
}

FrozenInit init_temporal_lm_shard(const LoadedCheckpoint& lm, model::GptImpl& model,
                                  optim::FlatParams& flat, bool adapters, uint64_t seed) {
  const at::Tensor generator = cpu_rng_state();
  torch::manual_seed(seed);
  parallel::init_shard_from_seed(model, flat, /*draw_model=*/adapters);
  set_cpu_rng_state(generator);
  load_init_shard(lm, model, flat, /*adapters=*/false);
  return frozen_init_source(lm, model);
}

TrainingState restore_training_shard(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                     optim::FlatParams& flat, optim::Optimizer& optimizer,
                                     FrozenInit& frozen, const TensorLocalizer& experts,
                                     torch::nn::Module* objective) {
  // Segments that are not the model's are an objective's (trained_param_sources).
  std::vector<size_t> objective_segments;
  const auto& segs = flat.segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    if (!model.param_tags().count(segs[i].name)) objective_segments.push_back(i);
  }
  if (!objective_segments.empty() && !objective) {
    throw Error("internal: restore_training_shard: '" + segs[objective_segments[0]].name +
                "' is not the model's and no objective module was given");
  }
  const bool lora = is_lora_checkpoint(ckpt);
  nlohmann::json lora_base;
  if (lora) {
    // Before anything is read: the base is the one the adapters were trained on.
    lora_base = checked_lora_base(ckpt);
    const auto base =
        CheckpointStore::load(lora_base.at("path").get<std::string>(), /*allow_fallback=*/false,
                              {"model.safetensors"}, /*tensors_by_range=*/true);
    frozen = frozen_init_source(base, model);
    frozen.lora_base = lora_base;  // as recorded (a whole resume keeps this one too)
  }
  TrainingState state = restore_shard_optimizer_and_state(ckpt, optimizer, experts);
  load_init_shard(ckpt, model, flat, /*adapters=*/lora, experts);
  if (!objective_segments.empty()) {
    // Small (projections): whole into the module, whose parameters the ShardOnly layout left
    // real and which are flat's tensors of those segments; this rank's part into its shard.
    load_objective_tensors(ckpt, *objective);
    for (size_t i : objective_segments) {
      parallel::write_segment_part(flat, segs[i], 0, flat.tensors()[i].detach());
    }
  }
  state.lora_base = lora_base;
  return state;
}

}  // namespace lmtrain::train
