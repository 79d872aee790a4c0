#include "checkpoint/unsharded_local_read.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/sharded_save.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safetensors_slice.h"
#include "optim/flat_params.h"

namespace lmtrain::train {
namespace {

// The header of a file of the checkpoint, which must be there.
core::SafetensorsHeader header_of(const LoadedCheckpoint& ckpt, const std::string& file,
                                  const std::string& why) {
  const std::string path = ckpt.dir + "/" + file;
  if (!std::filesystem::is_regular_file(path)) {
    throw Error("checkpoint " + ckpt.dir + " lacks " + file + why);
  }
  return core::read_safetensors_header(path);
}

// Every tensor of `file` but the RNG state, this rank's part of each (by the parameter its name
// ends in after `prefix_dot`: "exp_avg.<p>" -> p; the model's own names as they are).
void read_local_file(const LoadedCheckpoint& ckpt, const std::string& file, bool state_names,
                     const TensorLocalizer& local, const std::string& why,
                     std::vector<std::pair<std::string, at::Tensor>>& out) {
  const std::string path = ckpt.dir + "/" + file;
  for (const auto& e : header_of(ckpt, file, why).entries) {
    if (e.name == kRngTensor) continue;
    const auto dot = e.name.find('.');
    const std::string param = !state_names               ? e.name
                              : dot == std::string::npos ? std::string()
                                                         : e.name.substr(dot + 1);
    const LocalRows rows = param.empty() ? LocalRows{} : local.rows(param);
    out.emplace_back(e.name, read_local_rows(e.shape, rows, [&](int64_t b, int64_t n) {
                       return core::read_safetensors_slice(path, e.name, b, n);
                     }));
  }
}

// One process's flat layout of `model`'s parameters at their whole shapes (model.safetensors'
// header), checked against the signature the state was saved for.
std::vector<optim::ParamSegment> whole_flat_segments(const LoadedCheckpoint& ckpt,
                                                     model::GptImpl& model,
                                                     const nlohmann::json& layout) {
  std::map<std::string, std::vector<int64_t>> whole;
  for (const auto& e : header_of(ckpt, "model.safetensors", "").entries) whole[e.name] = e.shape;
  const auto& tags = model.param_tags();
  std::vector<optim::ParamSegment> segs;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    auto tag = tags.find(item.key());
    if (tag == tags.end() || !tag->second.trainable) continue;
    auto w = whole.find(item.key());
    if (tag->second.expert || w == whole.end()) {
      throw Error("checkpoint " + ckpt.dir + ": parameter '" + item.key() + "' is " +
                  (tag->second.expert ? "an expert stack (MoE does not combine with dist.tp)"
                                      : "not in its model.safetensors"));
    }
    optim::ParamSegment seg;
    seg.name = item.key();
    seg.shape = w->second;
    seg.numel = 1;
    for (int64_t n : seg.shape) seg.numel *= n;
    segs.push_back(std::move(seg));
  }
  std::reverse(segs.begin(), segs.end());  // FlatParams: reverse registration order
  optim::lay_out_segments(segs);
  const std::string saved = layout.value("flat_layout", std::string("?"));
  if (optim::layout_signature(segs) != saved) {
    throw Error("checkpoint " + ckpt.dir + ": its ZeRO optimizer shards were saved for another " +
                "parameter layout (" + saved + " vs " + optim::layout_signature(segs) +
                " for this model at its whole shapes): the model changed");
  }
  return segs;
}

// This rank's part of each parameter's moments from the W rank files' flat ranges (only the
// elements it needs; a row-parallel parameter's by blocks of whole rows, read_local_rows).
optim::NamedTensors local_from_flat_shards(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                           const nlohmann::json& layout,
                                           const TensorLocalizer& local) {
  if (layout.contains("experts")) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " holds ZeRO-1/2 state saved under expert parallelism, which a "
                     "tensor-parallel run does not resume (MoE does not combine with dist.tp)");
  }
  const auto world = layout.at("world_size").get<int64_t>();
  const auto shard = layout.at("shard_numel").get<int64_t>();
  const std::string why =
      " (its optimizer state was split over " + std::to_string(world) + " ranks)";
  for (int64_t r = 0; r < world; ++r) header_of(ckpt, optim_shard_file(r), why);
  optim::NamedTensors out;
  for (const auto& seg : whole_flat_segments(ckpt, model, layout)) {
    for (const std::string k : {"exp_avg", "exp_avg_sq"}) {
      // Elements [seg.offset + b, + n) of the flat moments, from the files that cover them.
      auto read = [&](int64_t b, int64_t n) {
        auto got = at::empty({n}, at::kFloat);
        for (int64_t pos = seg.offset + b; pos < seg.offset + b + n;) {
          const int64_t r = pos / shard, end = std::min(seg.offset + b + n, (r + 1) * shard);
          if (r >= world) {
            throw Error(log::format(
                "checkpoint %s: the ZeRO shards (%lld of %lld elements) end "
                "before parameter '%s' does",
                ckpt.dir.c_str(), (long long)world, (long long)shard, seg.name.c_str()));
          }
          got.narrow(0, pos - seg.offset - b, end - pos)
              .copy_(core::read_safetensors_slice(ckpt.dir + "/" + optim_shard_file(r), k,
                                                  pos - r * shard, end - pos));
          pos = end;
        }
        return got;
      };
      out.emplace_back(k + "." + seg.name, read_local_rows(seg.shape, local.rows(seg.name), read));
    }
  }
  return out;
}

}  // namespace

core::SafetensorsFile local_model_tensors(const LoadedCheckpoint& ckpt,
                                          const TensorLocalizer& local) {
  std::vector<std::pair<std::string, at::Tensor>> read;
  read_local_file(ckpt, "model.safetensors", /*state_names=*/false, local, "", read);
  core::SafetensorsFile out;
  for (auto& [name, t] : read) {
    out.names.push_back(name);
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

optim::NamedTensors local_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& local) {
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  const std::string kind = layout.value("kind", "named");
  if (kind == "flat_shards") return local_from_flat_shards(ckpt, model, layout, local);
  if (kind != "named" && kind != "muon") {
    throw Error("checkpoint " + ckpt.dir + ": optimizer state layout '" + kind +
                "' is not one a tensor-parallel run reads");
  }
  const int64_t world = kind == "muon" ? layout.value("world_size", int64_t{1}) : 1;
  const std::string why =
      " (its optimizer state was split over " + std::to_string(world) + " ranks)";
  optim::NamedTensors out;
  for (int64_t r = 0; r < world; ++r) {
    read_local_file(ckpt, optim_shard_file(static_cast<int>(r)), /*state_names=*/true, local, why,
                    out);
  }
  return out;
}

}  // namespace lmtrain::train
