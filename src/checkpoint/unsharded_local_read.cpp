#include "checkpoint/unsharded_local_read.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>

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

// This rank's part of `rows`' tensor of whole shape `shape`: its shape, with the split dim cut
// to the ranges when the tensor has the shape the split is of (read_local_rows' rule).
std::vector<int64_t> local_rows_shape(std::vector<int64_t> shape, const LocalRows& rows) {
  if (rows.dim < 0 || shape != rows.whole_shape) return shape;
  shape[rows.dim] = 0;
  for (const auto& [b, e] : rows.ranges) shape[rows.dim] += e - b;
  return shape;
}

// Every tensor of `file` but the RNG state, this rank's part of each (by the parameter its name
// ends in after the first dot with `state_names`: "exp_avg.<p>" -> p; the model's own names as
// they are), to be read when asked.
void local_file_entries(const LoadedCheckpoint& ckpt, const std::string& file, bool state_names,
                        const TensorLocalizer& local, const std::string& why,
                        std::vector<LocalStateEntry>& out) {
  const std::string path = ckpt.dir + "/" + file;
  for (const auto& e : header_of(ckpt, file, why).entries) {
    if (e.name == kRngTensor) continue;
    const auto dot = e.name.find('.');
    const std::string param = !state_names               ? e.name
                              : dot == std::string::npos ? std::string()
                                                         : e.name.substr(dot + 1);
    const LocalRows rows = param.empty() ? LocalRows{} : local.rows(param);
    out.push_back(
        {e.name, local_rows_shape(e.shape, rows), [path, name = e.name, shape = e.shape, rows] {
           return read_local_rows(shape, rows, [&](int64_t b, int64_t n) {
             return core::read_safetensors_slice(path, name, b, n);
           });
         }});
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
                  (tag->second.expert ? "an expert stack: ZeRO-1/2 moments of an MoE model (its "
                                        "experts in a padded region of their own) do not "
                                        "reshard into dist.tp yet; resume in the saved layout"
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
void local_flat_shard_entries(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                              const nlohmann::json& layout, const TensorLocalizer& local,
                              std::vector<LocalStateEntry>& out) {
  if (layout.contains("experts")) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " holds ZeRO-1/2 state saved under expert parallelism, which a "
                     "tensor-parallel run does not resume (dist.ep does not combine with dist.tp)");
  }
  const auto world = layout.at("world_size").get<int64_t>();
  const auto shard = layout.at("shard_numel").get<int64_t>();
  const std::string why =
      " (its optimizer state was split over " + std::to_string(world) + " ranks)";
  for (int64_t r = 0; r < world; ++r) header_of(ckpt, optim_shard_file(r), why);
  const std::string dir = ckpt.dir;
  for (const auto& seg : whole_flat_segments(ckpt, model, layout)) {
    const LocalRows rows = local.rows(seg.name);
    for (const std::string k : {"exp_avg", "exp_avg_sq"}) {
      out.push_back({k + "." + seg.name, local_rows_shape(seg.shape, rows), [=] {
                       // Elements [seg.offset + b, + n) of the flat moments, from the files
                       // that cover them.
                       auto read = [&](int64_t b, int64_t n) {
                         auto got = at::empty({n}, at::kFloat);
                         for (int64_t pos = seg.offset + b; pos < seg.offset + b + n;) {
                           const int64_t r = pos / shard;
                           const int64_t end = std::min(seg.offset + b + n, (r + 1) * shard);
                           if (r >= world) {
                             throw Error(log::format(
                                 "checkpoint %s: the ZeRO shards (%lld of %lld elements) end "
                                 "before parameter '%s' does",
                                 dir.c_str(), (long long)world, (long long)shard,
                                 seg.name.c_str()));
                           }
                           got.narrow(0, pos - seg.offset - b, end - pos)
                               .copy_(core::read_safetensors_slice(
                                   dir + "/" + optim_shard_file(static_cast<int>(r)), k,
                                   pos - r * shard, end - pos));
                           pos = end;
                         }
                         return got;
                       };
                       return read_local_rows(seg.shape, rows, read);
                     }});
    }
  }
}

// optim::SavedTensors over entries read when first asked for, one tensor's part held at a time
// (read_named_adam_range asks for a tensor's ranges in order, then the next tensor's).
class LocalStateFile : public optim::SavedTensors {
 public:
  explicit LocalStateFile(std::vector<LocalStateEntry> entries) : entries_(std::move(entries)) {
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
  }
  size_t files() const override { return 1; }
  std::vector<std::string> names(size_t file) const override {
    std::vector<std::string> out;
    if (file != 0) return out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }
  std::optional<std::vector<int64_t>> shape(size_t file, const std::string& name) const override {
    const auto it = index_.find(name);
    if (file != 0 || it == index_.end()) return std::nullopt;
    return entries_[it->second].shape;
  }
  at::Tensor read(size_t file, const std::string& name, int64_t begin,
                  int64_t count) const override {
    const auto it = index_.find(name);
    if (file != 0 || it == index_.end()) {
      throw Error("internal: LocalStateFile: no optimizer state '" + name + "'");
    }
    if (held_name_ != name) {
      held_ = at::Tensor();  // the previous one goes first
      held_ = entries_[it->second].read().reshape({-1});
      held_name_ = name;
    }
    return held_.narrow(0, begin, count);
  }

 private:
  std::vector<LocalStateEntry> entries_;
  std::map<std::string, size_t> index_;
  mutable std::string held_name_;
  mutable at::Tensor held_;
};

}  // namespace

TensorByName local_model_reader(const LoadedCheckpoint& ckpt, const TensorLocalizer& local) {
  std::vector<LocalStateEntry> entries;
  local_file_entries(ckpt, "model.safetensors", /*state_names=*/false, local, "", entries);
  auto by_name = std::make_shared<std::map<std::string, LocalStateEntry>>();
  for (auto& e : entries) by_name->emplace(e.name, std::move(e));
  return [by_name](const std::string& name) -> std::optional<at::Tensor> {
    const auto it = by_name->find(name);
    if (it == by_name->end()) return std::nullopt;
    return it->second.read();
  };
}

std::vector<LocalStateEntry> local_optimizer_entries(const LoadedCheckpoint& ckpt,
                                                     model::GptImpl& model,
                                                     const TensorLocalizer& local) {
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  const std::string kind = layout.value("kind", "named");
  std::vector<LocalStateEntry> out;
  if (kind == "flat_shards") {
    local_flat_shard_entries(ckpt, model, layout, local, out);
    return out;
  }
  if (kind != "named" && kind != "muon") {
    throw Error("checkpoint " + ckpt.dir + ": optimizer state layout '" + kind +
                "' is not one a tensor-parallel run reads");
  }
  const int64_t world = kind == "muon" ? layout.value("world_size", int64_t{1}) : 1;
  const std::string why =
      " (its optimizer state was split over " + std::to_string(world) + " ranks)";
  for (int64_t r = 0; r < world; ++r) {
    local_file_entries(ckpt, optim_shard_file(static_cast<int>(r)), /*state_names=*/true, local,
                       why, out);
  }
  return out;
}

optim::NamedTensors local_optimizer_state(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& local) {
  optim::NamedTensors out;
  for (auto& e : local_optimizer_entries(ckpt, model, local)) out.emplace_back(e.name, e.read());
  return out;
}

std::unique_ptr<optim::SavedTensors> local_adam_moments(const LoadedCheckpoint& ckpt,
                                                        model::GptImpl& model,
                                                        const TensorLocalizer& local) {
  return std::make_unique<LocalStateFile>(local_optimizer_entries(ckpt, model, local));
}

}  // namespace lmtrain::train
