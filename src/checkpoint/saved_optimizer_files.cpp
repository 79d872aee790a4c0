#include "checkpoint/saved_optimizer_files.h"

#include <ATen/ATen.h>

#include <utility>

#include "core/error.h"
#include "core/safetensors_slice.h"

namespace lmtrain::train {
namespace {

constexpr const char* kSavedMoments[2] = {"exp_avg", "exp_avg_sq"};

bool is_saved_moment(const std::string& name) {
  return name == kSavedMoments[0] || name == kSavedMoments[1];
}

}  // namespace

SavedOptimizerFiles::SavedOptimizerFiles(std::vector<std::string> paths)
    : paths_(std::move(paths)) {
  for (const auto& p : paths_) headers_.push_back(core::read_safetensors_header(p));
}

std::vector<std::string> SavedOptimizerFiles::names(size_t file) const {
  std::vector<std::string> out;
  for (const auto& e : headers_.at(file).entries) out.push_back(e.name);
  return out;
}

std::optional<std::vector<int64_t>> SavedOptimizerFiles::shape(size_t file,
                                                               const std::string& name) const {
  for (const auto& e : headers_.at(file).entries) {
    if (e.name == name) return e.shape;
  }
  return std::nullopt;
}

at::Tensor SavedOptimizerFiles::read(size_t file, const std::string& name, int64_t begin,
                                     int64_t count) const {
  return core::read_safetensors_slice(paths_.at(file), name, begin, count);
}

SavedShardedMoments SavedShardedMoments::flat(const std::string& dir, const nlohmann::json& meta,
                                              int64_t world, int64_t shard,
                                              const TensorLocalizer* experts) {
  SavedShardedMoments out(dir, meta);
  out.flat_ = true;
  out.world_ = world;
  out.shard_ = shard;
  if (!experts) return out;
  out.local_ = *experts;
  for (const auto& t : model_shards_of(meta).at("tensors")) {
    const std::string seg = t.value("segment", std::string());
    if (!t.contains("slices") || experts->rows(seg).dim < 0) continue;  // not an expert stack
    out.add_named(t, seg);
  }
  return out;
}

SavedShardedMoments SavedShardedMoments::named(const std::string& dir, const nlohmann::json& meta,
                                               const TensorLocalizer& local) {
  SavedShardedMoments out(dir, meta);
  out.local_ = local;
  for (const auto& t : model_shards_of(meta).at("tensors")) {
    if (!t.contains("flat") && !t.contains("slices")) continue;  // a buffer
    if (!t.contains("segment") || !t["segment"].is_string()) {
      throw Error("checkpoint " + dir + ": meta.json's model_shards: tensor '" +
                  t.value("name", std::string("?")) + "' has no flat segment name");
    }
    out.add_named(t, t["segment"].get<std::string>());
  }
  return out;
}

void SavedShardedMoments::add_named(const nlohmann::json& t, const std::string& seg) {
  auto shape = t.at("shape").get<std::vector<int64_t>>();
  if (local_) {
    // This rank's part: its rows along the split dim when the saved tensor has the shape the
    // split is of (read_local_rows' rule; any other shape is read whole and then refused).
    const LocalRows rows = local_.rows(seg);
    if (rows.dim >= 0 && shape == rows.whole_shape) {
      shape[rows.dim] = 0;
      for (const auto& [b, e] : rows.ranges) shape[rows.dim] += e - b;
    }
  }
  for (const char* k : kSavedMoments) {
    const std::string name = std::string(k) + "." + seg;
    if (!named_.count(name)) order_.push_back(name);
    named_[name] = Named{&t, k, seg, shape};
  }
}

std::vector<std::string> SavedShardedMoments::names(size_t file) const {
  std::vector<std::string> out;
  if (flat_) out = {kSavedMoments[0], kSavedMoments[1]};
  if (file == 0) out.insert(out.end(), order_.begin(), order_.end());
  return out;
}

std::optional<std::vector<int64_t>> SavedShardedMoments::shape(size_t file,
                                                               const std::string& name) const {
  if (flat_ && is_saved_moment(name) && file < files()) return std::vector<int64_t>{shard_};
  auto it = named_.find(name);
  if (file != 0 || it == named_.end()) return std::nullopt;
  return it->second.shape;
}

at::Tensor SavedShardedMoments::read(size_t file, const std::string& name, int64_t begin,
                                     int64_t count) const {
  if (flat_ && is_saved_moment(name)) {
    const int64_t from = static_cast<int64_t>(file) * shard_ + begin;
    return read_flat_range(dir_, meta_, name, from, from + count);
  }
  auto it = named_.find(name);
  if (file != 0 || it == named_.end()) {
    throw Error("checkpoint " + dir_ + ": no optimizer state '" + name + "' among its shards");
  }
  const Named& n = it->second;
  const nlohmann::json& t = *n.entry;
  if (t.contains("flat") && (!local_ || local_.rows(n.segment).dim < 0)) {
    // Saved whole in the flat space (TP rank 0's layout, or what every EP rank shares) and
    // wanted whole: the range alone.
    const int64_t fb = t["flat"][0].get<int64_t>() + begin;
    return read_flat_range(dir_, meta_, n.moment, fb, fb + count, t.value("tp_rank", int64_t{0}),
                           t.value("ep_rank", int64_t{0}));
  }
  // Read whole once (one tensor at a time), then cut piece by piece.
  if (whole_name_ != name) {
    whole_ = at::Tensor();  // the previous one goes first
    whole_ = (local_ ? read_local_shard_entry(dir_, meta_, t, n.moment, n.segment, local_)
                     : read_shard_entry(dir_, meta_, t, n.moment))
                 .reshape({-1});
    whole_name_ = name;
  }
  const at::Tensor& whole = whole_;
  if (whole.numel() < begin + count) {
    throw Error("checkpoint " + dir_ + ": optimizer state '" + name + "' has " +
                std::to_string(whole.numel()) + " elements, " + std::to_string(begin + count) +
                " were asked for (a model of another shape?)");
  }
  return whole.narrow(0, begin, count);
}

}  // namespace lmtrain::train
