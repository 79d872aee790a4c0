#include "checkpoint/optimizer_by_name.h"

#include <ATen/ATen.h>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/sharded_save.h"
#include "core/error.h"
#include "core/log.h"
#include "optim/flat_params.h"

namespace lmtrain::train {
namespace {

const core::SafetensorsFile& optim_file_of(const LoadedCheckpoint& ckpt, int rank, size_t files) {
  auto it = ckpt.files.find(optim_shard_file(rank));
  if (it == ckpt.files.end()) {
    throw Error("checkpoint " + ckpt.dir + " lacks " + optim_shard_file(rank) +
                " (its optimizer state was split over " + std::to_string(files) + " ranks)");
  }
  return it->second;
}

// One process's flat layout of `model`'s parameters at their whole shapes (`whole`: the
// checkpoint's model tensors by name), checked against the signature the state was saved for.
std::vector<optim::ParamSegment> whole_flat_segments(const LoadedCheckpoint& ckpt,
                                                     model::GptImpl& model,
                                                     const nlohmann::json& layout) {
  const auto& whole = ckpt.files.at("model.safetensors").tensors;
  const auto& tags = model.param_tags();
  std::vector<optim::ParamSegment> segs;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    auto tag = tags.find(item.key());
    if (tag == tags.end() || !tag->second.trainable) continue;
    if (tag->second.expert) {
      throw UsageError("checkpoint " + ckpt.dir +
                       ": ZeRO-1/2 moments of expert stacks are not cut into a tensor-parallel "
                       "run's pieces (MoE does not combine with dist.tp)");
    }
    auto w = whole.find(item.key());
    if (w == whole.end()) {
      throw Error("checkpoint " + ckpt.dir + ": model.safetensors has no tensor '" + item.key() +
                  "'");
    }
    optim::ParamSegment seg;
    seg.name = item.key();
    seg.shape = w->second.sizes().vec();
    seg.numel = w->second.numel();
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

// Each parameter's whole moments out of the W rank files' flat ranges (only those it covers).
optim::NamedTensors named_from_flat_shards(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                           const nlohmann::json& layout) {
  if (layout.contains("experts")) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " holds ZeRO-1/2 state saved under expert parallelism, which a "
                     "tensor-parallel run does not resume (MoE does not combine with dist.tp)");
  }
  const auto world = layout.at("world_size").get<size_t>();
  const auto shard = layout.at("shard_numel").get<int64_t>();
  std::vector<const core::SafetensorsFile*> files;
  for (size_t r = 0; r < world; ++r) {
    files.push_back(&optim_file_of(ckpt, static_cast<int>(r), world));
  }
  optim::NamedTensors out;
  for (const auto& seg : whole_flat_segments(ckpt, model, layout)) {
    for (const std::string k : {"exp_avg", "exp_avg_sq"}) {
      auto whole = at::empty({seg.numel}, at::kFloat);
      for (int64_t pos = seg.offset; pos < seg.offset + seg.numel;) {
        const int64_t r = pos / shard, end = std::min(seg.offset + seg.numel, (r + 1) * shard);
        if (r >= static_cast<int64_t>(world)) {
          throw Error(
              log::format("checkpoint %s: the ZeRO shards (%zu of %lld elements) end "
                          "before parameter '%s'",
                          ckpt.dir.c_str(), world, (long long)shard, seg.name.c_str()));
        }
        auto src = files[r]->tensors.find(k);
        if (src == files[r]->tensors.end() || src->second.numel() != shard) {
          throw Error(log::format("checkpoint %s: %s has no '%s' of %lld elements",
                                  ckpt.dir.c_str(), optim_shard_file(r).c_str(), k.c_str(),
                                  (long long)shard));
        }
        whole.narrow(0, pos - seg.offset, end - pos)
            .copy_(src->second.reshape({-1}).narrow(0, pos - r * shard, end - pos));
        pos = end;
      }
      out.emplace_back(k + "." + seg.name, whole.view(seg.shape));
    }
  }
  return out;
}

}  // namespace

optim::NamedTensors whole_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model) {
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  const std::string kind = layout.value("kind", "named");
  if (kind == "flat_shards") return named_from_flat_shards(ckpt, model, layout);
  if (kind != "named" && kind != "muon") {
    throw Error("checkpoint " + ckpt.dir + ": optimizer state layout '" + kind +
                "' is not one a tensor-parallel run reads");
  }
  const size_t world = kind == "muon" ? layout.value("world_size", size_t{1}) : 1;
  optim::NamedTensors out;
  for (size_t r = 0; r < world; ++r) {
    for (const auto& [name, t] : optim_file_of(ckpt, static_cast<int>(r), world).tensors) {
      if (name != kRngTensor) out.emplace_back(name, t);
    }
  }
  return out;
}

}  // namespace lmtrain::train
