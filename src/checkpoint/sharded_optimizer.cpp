// Restoring optimizer state from a sharded checkpoint (checkpoint/sharded_reader.h): Adam
// moments by flat range or by parameter, Muon's state by name from its TP ranks' pieces.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/saved_optimizer_files.h"
#include "checkpoint/sharded_reader.h"
#include "core/error.h"
#include "core/safetensors_slice.h"

namespace lmtrain::train {
namespace {

// Optimizer state saved by name per TP rank ("by_name" files: Muon under dist.tp), each tensor
// "<state>.<segment>" made whole from its TP ranks' pieces; localized when `localize` is set.
optim::NamedTensors read_named_state(const std::string& dir, const nlohmann::json& meta,
                                     const TensorLocalizer& localize) {
  const auto& s = model_shards_of(meta);
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
    // TP rank tp_rank's piece, of its local shape, from the file that holds it.
    auto piece_at = [&](int64_t tp_rank, const std::vector<int64_t>& local_shape) {
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
    };
    // A TP run of the saving TP degree reads its own piece only; others make the whole first.
    if (localize && own_saved_slice(meta, *entry->second, seg, localize) &&
        where[name].count(localize.tp_rank)) {
      const LocalRows rows = localize.rows(seg);
      auto shape = entry->second->at("shape").get<std::vector<int64_t>>();
      if (rows.dim >= 0) {
        shape[rows.dim] = 0;
        for (const auto& [b, e] : rows.ranges) shape[rows.dim] += e - b;
      }
      out.emplace_back(name, piece_at(localize.tp_rank, shape));
      continue;
    }
    auto whole = assemble_shard_entry(
        *entry->second, [&](const nlohmann::json& slice, const std::vector<int64_t>& local_shape) {
          return piece_at(slice.value("tp_rank", int64_t{0}), local_shape);
        });
    out.emplace_back(name, localize ? localize(seg, whole) : whole);
  }
  return out;
}

}  // namespace

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
  // TP or EP slices (saved, or wanted now) go by parameter: no flat layout is shared (an EP
  // checkpoint's moments of the shared region lie in flat shards, its experts' in EP slices).
  const auto& shards = model_shards_of(meta);
  const bool by_name = shards.value("tp", 1) > 1 || shards.value("ep", 1) > 1 || localize;
  // A ZeRO optimizer under expert parallelism resuming a ZeRO checkpoint of its own dist.ep and
  // parameter layout: its own flat range of the shared region's moments, and its own experts'
  // slices by name (the flat shards' "experts": "named"), nothing else read.
  const bool own_ep_shards =
      kind == "flat_shards" && target.contains("experts") && localize && localize.ep > 1 &&
      shards.value("ep", int64_t{1}) == localize.ep &&
      saved.value("flat_layout", nlohmann::json()) == target.at("flat_layout");
  // By name also for a ZeRO optimizer that holds its experts apart (dist.ep > 1) from shards
  // that cover them (saved at dist.ep=1): it takes its experts' slices of the whole stacks.
  if (kind == "flat_shards" && !own_ep_shards && (by_name || target.contains("experts"))) {
    target = {{"kind", "named"}};  // any AdamW takes its part of moments given by name
  }
  // Either way the optimizer asks for the flat range it keeps (optim/adam_state.h) and only the
  // saved elements of that range are read.
  if (target.value("kind", "named") == "flat_shards") {
    // The moments lie in the same flat layout (only the tail padding depends on the ranks).
    if (target.at("flat_layout") != saved.value("flat_layout", nlohmann::json())) {
      throw Error("checkpoint " + dir +
                  ": its optimizer state was saved for a different parameter " + "layout (" +
                  saved.value("flat_layout", std::string("?")) + " vs " +
                  target.at("flat_layout").get<std::string>() + "): the model changed");
    }
    const auto moments = SavedShardedMoments::flat(
        dir, meta, target.at("world_size").get<int64_t>(), target.at("shard_numel").get<int64_t>(),
        own_ep_shards ? &localize : nullptr);
    optimizer.load_saved_state(moments, target, step);
  } else if (target.value("kind", "named") == "named") {
    optimizer.load_saved_state(SavedShardedMoments::named(dir, meta, localize), target, step);
  } else {
    throw Error("checkpoint " + dir + " holds sharded AdamW state, which optimizer " +
                optimizer.name() + " (state layout '" + kind + "') cannot resume from");
  }
}

}  // namespace lmtrain::train
