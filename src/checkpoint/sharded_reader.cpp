#include "checkpoint/sharded_reader.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/shard_layout_check.h"
#include "core/error.h"
#include "core/safetensors_slice.h"
#include "core/sha256.h"

namespace lmtrain::train {
namespace {

constexpr int kShardFormat = 1;

// meta.json's "model_shards", checked for a format this reader knows and for its structure.
const nlohmann::json& shards_of(const nlohmann::json& meta) {
  const auto& s = meta.at("model_shards");
  const auto& format = s.is_object() && s.contains("format") ? s["format"] : nlohmann::json();
  const int64_t f = format.is_number_integer() ? format.get<int64_t>() : 0;
  if (f != kShardFormat) {
    throw Error("checkpoint: model_shards format " + std::to_string(f) +
                " is not one this lmtrain reads (" + std::to_string(kShardFormat) +
                "): it was written by a newer version");
  }
  check_model_shards(s);
  return s;
}

std::string layout_text(const nlohmann::json& s) {
  const std::string ranks = "the " + std::to_string(s.value("world_size", 0)) + "-rank ";
  const int64_t tp = s.value("tp", 1), zero = s.value("zero", 0);
  if (tp <= 1) return ranks + "ZeRO-" + std::to_string(zero) + " layout";
  return ranks + "dist.tp=" + std::to_string(tp) +
         (zero > 0 ? " x ZeRO-" + std::to_string(zero) : "") + " layout";
}

// TP rank `tp_rank`'s local tensor of a parameter, of shape `local_shape`, whose flat range in
// that rank's layout is `flat` ([b, e]).
using LocalPiece = std::function<at::Tensor(int64_t tp_rank, const nlohmann::json& flat,
                                            const std::vector<int64_t>& local_shape)>;

// The whole tensor of entry `t` from its pieces: its flat range (TP rank 0's, whole on every TP
// rank), or its TP slices put back in place.
at::Tensor assemble_entry(const nlohmann::json& t, const LocalPiece& piece) {
  const auto shape = t.at("shape").get<std::vector<int64_t>>();
  if (t.contains("flat")) return piece(t.value("tp_rank", int64_t{0}), t["flat"], shape);
  auto whole = at::zeros(shape, at::kFloat);
  for (const auto& sl : t.at("slices")) {
    const int64_t dim = sl.at("dim").get<int64_t>();
    auto local_shape = shape;
    local_shape[dim] = 0;
    for (const auto& r : sl.at("ranges"))
      local_shape[dim] += r[1].get<int64_t>() - r[0].get<int64_t>();
    const auto local = piece(sl.value("tp_rank", int64_t{0}), sl["flat"], local_shape);
    int64_t at_local = 0;
    for (const auto& r : sl.at("ranges")) {
      const int64_t rb = r[0].get<int64_t>(), n = r[1].get<int64_t>() - rb;
      whole.narrow(dim, rb, n).copy_(local.narrow(dim, at_local, n));
      at_local += n;
    }
  }
  return whole;
}

// The whole tensor of entry `t` from the flat tensor `flat_name` ("params", "exp_avg",
// "exp_avg_sq").
at::Tensor read_entry(const std::string& dir, const nlohmann::json& meta, const nlohmann::json& t,
                      const std::string& flat_name) {
  return assemble_entry(
      t, [&](int64_t tp_rank, const nlohmann::json& flat, const std::vector<int64_t>& local_shape) {
        const int64_t b = flat[0].get<int64_t>(), e = flat[1].get<int64_t>();
        return read_flat_range(dir, meta, flat_name, b, e, tp_rank).reshape(local_shape);
      });
}

// Optimizer state saved by name per TP rank ("by_name" files: Muon under dist.tp), each tensor
// "<state>.<segment>" made whole from its TP ranks' pieces; localized when `localize` is set.
optim::NamedTensors read_named_state(const std::string& dir, const nlohmann::json& meta,
                                     const TensorLocalizer& localize) {
  const auto& s = shards_of(meta);
  // name -> (TP rank -> the file that holds that rank's piece), from the files' headers.
  std::map<std::string, std::map<int64_t, std::string>> where;
  std::vector<std::string> order;
  for (const auto& f : s.at("files")) {
    if (!f.value("by_name", false)) continue;
    const std::string file = f.at("file").get<std::string>();
    if (!std::filesystem::is_regular_file(dir + "/" + file)) {
      throw Error("checkpoint " + dir + ": shard file " + file + " is missing" +
                  shard_file_note(meta, file));
    }
    for (const auto& entry : core::read_safetensors_header(dir + "/" + file).entries) {
      const std::string& name = entry.name;
      if (name == kRngTensor) continue;
      if (!where.count(name)) order.push_back(name);
      where[name][f.value("tp_rank", int64_t{0})] = file;
    }
  }
  std::map<std::string, const nlohmann::json*> by_segment;
  for (const auto& t : s.at("tensors")) {
    if (t.contains("segment") && t["segment"].is_string()) {
      by_segment[t["segment"].get<std::string>()] = &t;
    }
  }
  optim::NamedTensors out;
  for (const auto& name : order) {
    const auto dot = name.find('.');
    const std::string seg = dot == std::string::npos ? name : name.substr(dot + 1);
    auto entry = by_segment.find(seg);
    if (entry == by_segment.end()) {
      throw Error("checkpoint " + dir + ": optimizer state '" + name +
                  "' belongs to no parameter of model_shards");
    }
    auto whole = assemble_entry(*entry->second, [&](int64_t tp_rank, const nlohmann::json&,
                                                    const std::vector<int64_t>& local_shape) {
      auto file = where[name].find(tp_rank);
      if (file == where[name].end()) {
        throw Error("checkpoint " + dir + ": no optimizer file of TP rank " +
                    std::to_string(tp_rank) + " holds '" + name + "'");
      }
      auto piece = core::read_safetensors_slice(dir + "/" + file->second, name);
      if (piece.sizes().vec() != local_shape) {
        throw Error("checkpoint " + dir + ": " + file->second + "'s '" + name + "' has shape " +
                    c10::str(piece.sizes()) + ", its slice " + c10::str(local_shape));
      }
      return piece;
    });
    out.emplace_back(name, localize ? localize(seg, whole) : whole);
  }
  return out;
}

}  // namespace

bool has_model_shards(const nlohmann::json& meta) {
  return meta.is_object() && meta.contains("model_shards");
}

std::set<std::string> model_shard_files(const nlohmann::json& meta) {
  std::set<std::string> out;
  if (!has_model_shards(meta)) return out;
  for (const auto& f : shards_of(meta).at("files")) out.insert(f.at("file").get<std::string>());
  return out;
}

std::set<std::string> sharded_logical_files(const nlohmann::json& meta) {
  std::set<std::string> out;
  if (!has_model_shards(meta)) return out;
  for (const auto& t : shards_of(meta).at("tensors")) out.insert(t.at("in").get<std::string>());
  return out;
}

std::string shard_file_note(const nlohmann::json& meta, const std::string& file) {
  if (!has_model_shards(meta)) return "";
  const auto& s = shards_of(meta);
  for (const auto& f : s.value("files", nlohmann::json::array())) {
    if (f.value("file", "") == file) {
      return " (the shard of rank " + std::to_string(f.value("rank", -1)) + " of " +
             layout_text(s) + ")";
    }
  }
  return "";
}

at::Tensor read_flat_range(const std::string& dir, const nlohmann::json& meta,
                           const std::string& tensor, int64_t begin, int64_t end, int64_t tp_rank) {
  const auto& s = shards_of(meta);
  auto out = at::zeros({end - begin}, at::kFloat);
  for (const auto& f : s.at("files")) {
    if (f.value("tp_rank", int64_t{0}) != tp_rank) continue;  // another TP rank's flat layout
    if (f.value("by_name", false)) continue;                  // no flat range
    const auto& holds = f.at("tensors");
    if (std::find(holds.begin(), holds.end(), tensor) == holds.end()) continue;
    const int64_t fb = f.at("flat")[0].get<int64_t>(), fe = f.at("flat")[1].get<int64_t>();
    const int64_t lo = std::max(begin, fb), hi = std::min(end, fe);
    if (lo >= hi) continue;
    const std::string file = f.at("file").get<std::string>();
    const std::string path = dir + "/" + file;
    if (!std::filesystem::is_regular_file(path)) {
      throw Error("checkpoint " + dir + ": shard file " + file + " is missing" +
                  shard_file_note(meta, file));
    }
    auto piece = core::read_safetensors_slice(path, tensor, lo - fb, hi - lo);
    out.narrow(0, lo - begin, hi - lo).copy_(piece);
  }
  return out;
}

core::SafetensorsFile assemble_sharded_file(const std::string& dir, const nlohmann::json& meta,
                                            const std::string& logical_file) {
  core::SafetensorsFile out;
  for (const auto& t : shards_of(meta).at("tensors")) {
    if (t.at("in").get<std::string>() != logical_file) continue;
    const std::string name = t.at("name").get<std::string>();
    at::Tensor value;
    if (t.contains("flat") || t.contains("slices")) {
      value = read_entry(dir, meta, t, "params");
    } else if (t.contains("file")) {
      const std::string file = t["file"].get<std::string>();
      if (!std::filesystem::is_regular_file(dir + "/" + file)) {
        throw Error("checkpoint " + dir + ": shard file " + file + " is missing" +
                    shard_file_note(meta, file));
      }
      value = core::read_safetensors_slice(dir + "/" + file, name);
    } else {
      throw Error("checkpoint " + dir + ": tensor '" + name +
                  "' is stored in a way this lmtrain does not read (no \"flat\", \"slices\" or "
                  "\"file\")");
    }
    out.names.push_back(name);
    out.tensors.emplace(name, std::move(value));
  }
  if (out.names.empty()) {
    throw Error("checkpoint " + dir + " has no " + logical_file + " among its shards");
  }
  return out;
}

std::string model_weights_sha256(const nlohmann::json& meta) {
  const auto& files = meta.at("files");
  if (files.contains("model.safetensors") || !has_model_shards(meta)) {
    return files.at("model.safetensors").at("sha256").get<std::string>();
  }
  std::string listed;
  for (const auto& f : shards_of(meta).at("files")) {
    const std::string name = f.at("file").get<std::string>();
    if (name.compare(0, 6, "model.") == 0) listed += files.at(name).at("sha256").get<std::string>();
  }
  return core::sha256_hex(listed);
}

void restore_sharded_optimizer(const std::string& dir, const nlohmann::json& meta,
                               optim::Optimizer& optimizer, const TensorLocalizer& localize) {
  const auto& om = meta.at("optimizer");
  const int64_t step = om.at("step").get<int64_t>();
  const auto& saved = om.at("layout");
  nlohmann::json target = optimizer.state_layout();
  const std::string kind = target.value("kind", "named");
  if (saved.value("kind", "") == "muon" || kind == "muon") {
    // Muon's state goes by name (sharded_save.h): whole from the pieces, then cut to ours.
    if (saved.value("kind", "") != kind) {
      throw UsageError("checkpoint " + dir + " holds " + om.value("name", std::string("?")) +
                       " state, which optimizer " + optimizer.name() +
                       " cannot resume from: resume with the optimizer it was trained with");
    }
    optimizer.load_state({read_named_state(dir, meta, localize)}, saved, step);
    return;
  }
  // TP slices (saved, or wanted now) go by parameter: no flat layout is shared.
  const bool by_name = shards_of(meta).value("tp", 1) > 1 || localize;
  std::vector<optim::NamedTensors> rank_files;
  if (kind == "flat_shards" && !target.contains("experts") && by_name) {
    target = {{"kind", "named"}};  // any AdamW takes its part of moments given by name
  }
  if (kind == "flat_shards" && !target.contains("experts") && !by_name) {
    // The moments lie in the same flat layout (only the tail padding depends on the ranks).
    if (target.at("flat_layout") != saved.value("flat_layout", nlohmann::json())) {
      throw Error("checkpoint " + dir +
                  ": its optimizer state was saved for a different parameter " + "layout (" +
                  saved.value("flat_layout", std::string("?")) + " vs " +
                  target.at("flat_layout").get<std::string>() + "): the model changed");
    }
    const auto world = target.at("world_size").get<int64_t>();
    const auto shard = target.at("shard_numel").get<int64_t>();
    const int64_t own = optimizer.shard_begin() / shard;
    // Other ranks' slices are never read: a broadcast zero stands in for them (no memory).
    const auto absent = at::zeros({1}, at::kFloat).expand({shard});
    for (int64_t q = 0; q < world; ++q) {
      optim::NamedTensors file;
      for (const char* k : {"exp_avg", "exp_avg_sq"}) {
        file.emplace_back(
            k, q == own ? read_flat_range(dir, meta, k, q * shard, (q + 1) * shard) : absent);
      }
      rank_files.push_back(std::move(file));
    }
  } else if (target.value("kind", "named") == "named") {
    optim::NamedTensors file;
    for (const auto& t : shards_of(meta).at("tensors")) {
      if (!t.contains("flat") && !t.contains("slices")) continue;  // a buffer
      if (!t.contains("segment") || !t["segment"].is_string()) {
        throw Error("checkpoint " + dir + ": meta.json's model_shards: tensor '" +
                    t.value("name", std::string("?")) + "' has no flat segment name");
      }
      const std::string seg = t["segment"].get<std::string>();
      for (const char* k : {"exp_avg", "exp_avg_sq"}) {
        auto whole = read_entry(dir, meta, t, k);
        file.emplace_back(std::string(k) + "." + seg, localize ? localize(seg, whole) : whole);
      }
    }
    rank_files.push_back(std::move(file));
  } else {
    throw Error("checkpoint " + dir + " holds sharded AdamW state, which optimizer " +
                optimizer.name() + " (state layout '" + kind + "') cannot resume from");
  }
  optimizer.load_state(rank_files, target, step);
}

}  // namespace lmtrain::train
