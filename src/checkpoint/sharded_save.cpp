#include "checkpoint/sharded_save.h"

#include <ATen/ATen.h>

#include <set>

#include "checkpoint/lora_checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace lmtrain::train {
namespace {

bool starts_with_prefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

int64_t shard_numel_of(const ShardedSave& save) {
  return shared_flat_numel(save) / save.shard_ranks;
}
int64_t optim_numel_of(const ShardedSave& save) {
  return shared_flat_numel(save) / save.optim_ranks;
}

// The model's checkpointed tensors that are not in the flat layout (its buffers).
TensorList non_flat_model_tensors(const ShardedSave& save, const model::GptImpl& model) {
  std::set<std::string> in_flat;
  for (const auto& seg : save.flat->segments()) in_flat.insert(seg.name);
  TensorList out;
  for (auto& [name, t] : checkpoint_model_tensors(model)) {
    if (!in_flat.count(name)) out.emplace_back(name, t);
  }
  return out;
}

nlohmann::json range_json(int64_t begin, int64_t end) {
  return nlohmann::json::array({begin, end});
}

// Adam moments given by parameter name (`state`: "exp_avg.<segment>", "exp_avg_sq.<segment>")
// laid into elements [begin, end) of the flat layout, the padding 0: "exp_avg" and "exp_avg_sq",
// (end - begin,) each. Every segment in the range must have both; `what` names the file for the
// error that says which one is missing.
TensorList flat_moments(const optim::FlatParams& flat, const optim::Optimizer& optimizer,
                        const optim::NamedTensors& state, int64_t begin, int64_t end,
                        const std::string& what) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  TensorList out;
  for (const std::string k : {"exp_avg", "exp_avg_sq"}) {
    auto buf = at::zeros({end - begin}, flat.options());
    for (const auto& seg : flat.segments()) {
      if (seg.offset < begin || seg.offset >= end) continue;
      auto it = by_name.find(k + "." + seg.name);
      if (it == by_name.end()) {
        throw Error("internal: optimizer " + optimizer.name() + " holds no " + k + "." + seg.name +
                    " to save as " + what);
      }
      buf.narrow(0, seg.offset - begin, seg.numel).copy_(it->second.reshape({-1}));
    }
    out.emplace_back(k, buf);
  }
  return out;
}

}  // namespace

int64_t shared_flat_numel(const ShardedSave& save) {
  return save.ep > 1 ? save.flat->expert_begin() : save.flat->numel();
}

std::string model_expert_file(int ep_rank) {
  return "model.ep" + std::to_string(ep_rank) + ".safetensors";
}

std::string optim_expert_file(int ep_rank) {
  return "optim.ep" + std::to_string(ep_rank) + ".safetensors";
}

TensorList expert_model_tensors(const ShardedSave& save) {
  return {{"params", save.flat->expert_params()}};
}

TensorList expert_optim_tensors(const ShardedSave& save, const optim::Optimizer& optimizer) {
  // The moments by name ("exp_avg.<stack>"), laid into the expert region's flat layout, as the
  // parameters lie in model.ep<e>.
  return flat_moments(*save.flat, optimizer, optimizer.expert_state(), save.flat->expert_begin(),
                      save.flat->numel(), "an expert shard");
}

std::string model_shard_file(int rank) {
  return "model.rank" + std::to_string(rank) + ".safetensors";
}

std::string optim_shard_file(int rank) {
  return "optim.rank" + std::to_string(rank) + ".safetensors";
}

TensorList optim_shard_tensors(const ShardedSave& save, const optim::Optimizer& optimizer) {
  auto state = optimizer.state_tensors();
  if (save.optim_by_name) return state;
  if (state.size() == 2 && state[0].first == "exp_avg" && state[1].first == "exp_avg_sq") {
    return state;  // a ZeRO optimizer's shard (or its whole flat on one rank)
  }
  // A replicated AdamW's moments by parameter ("exp_avg.<name>"), laid back into the flat
  // layout, so that every layout records its moments the same way. Under expert parallelism
  // the shared region only (the experts go to optim.ep<e>).
  return flat_moments(*save.flat, optimizer, state, 0, shared_flat_numel(save), "a shard");
}

void write_rank_shards(const std::string& run_dir, int64_t step, int rank, const ShardedSave& save,
                       const optim::Optimizer& optimizer) {
  const int d = rank / save.tp;
  const bool experts = save.ep > 1 && rank < save.ep;  // EP rank `rank` of the first EP group
  if (rank == 0 || (d >= save.shard_ranks && d >= save.optim_ranks && !experts)) return;
  const std::string staging = CheckpointStore::staging_dir(run_dir, step);
  core::ensure_dir(staging);
  if (experts) {
    core::write_safetensors(staging + "/" + model_expert_file(rank), expert_model_tensors(save),
                            {{"format", "pt"}});
    core::write_safetensors(staging + "/" + optim_expert_file(rank),
                            expert_optim_tensors(save, optimizer), {{"format", "pt"}});
  }
  if (d < save.shard_ranks) {
    const int64_t shard = shard_numel_of(save);
    core::write_safetensors(staging + "/" + model_shard_file(rank),
                            {{"params", save.flat->param_slice(d * shard, shard)}},
                            {{"format", "pt"}});
  }
  if (d < save.optim_ranks) {
    core::write_safetensors(staging + "/" + optim_shard_file(rank),
                            optim_shard_tensors(save, optimizer), {{"format", "pt"}});
  }
}

std::vector<std::string> other_rank_shard_files(const ShardedSave& save) {
  std::vector<std::string> out;
  for (int d = 0; d < std::max(save.shard_ranks, save.optim_ranks); ++d) {
    for (int t = 0; t < save.tp; ++t) {
      const int r = d * save.tp + t;
      if (r == 0) continue;
      if (d < save.shard_ranks) out.push_back(model_shard_file(r));
      if (d < save.optim_ranks) out.push_back(optim_shard_file(r));
    }
  }
  for (int e = 1; save.ep > 1 && e < save.ep; ++e) {
    out.push_back(model_expert_file(e));
    out.push_back(optim_expert_file(e));
  }
  return out;
}

TensorList rank0_model_shard(const ShardedSave& save, const model::GptImpl& model) {
  TensorList out{{"params", save.flat->param_slice(0, shard_numel_of(save))}};
  for (auto& item : non_flat_model_tensors(save, model)) out.push_back(std::move(item));
  return out;
}

nlohmann::json model_shards_meta(const ShardedSave& save, const model::GptImpl& model) {
  const optim::FlatParams& flat = *save.flat;
  const int64_t shard = shard_numel_of(save), optim_shard = optim_numel_of(save);
  nlohmann::json files = nlohmann::json::array();
  auto file_entry = [&save](const std::string& file, int d, int t, nlohmann::json tensors,
                            int64_t n) {
    nlohmann::json f = {{"file", file},
                        {"rank", d * save.tp + t},
                        {"tensors", std::move(tensors)},
                        {"flat", range_json(d * n, (d + 1) * n)}};
    if (save.tp > 1) f["tp_rank"] = t;  // which TP rank's flat layout the range indexes
    return f;
  };
  for (int d = 0; d < std::max(save.shard_ranks, save.optim_ranks); ++d) {
    for (int t = 0; t < save.tp; ++t) {
      const int r = d * save.tp + t;
      if (d < save.shard_ranks) {
        files.push_back(file_entry(model_shard_file(r), d, t, {"params"}, shard));
      }
      if (d < save.optim_ranks && save.optim_by_name) {
        // No flat range: the file's tensors are TP rank t's pieces, by name.
        nlohmann::json f = {{"file", optim_shard_file(r)}, {"rank", r}, {"by_name", true}};
        if (save.tp > 1) f["tp_rank"] = t;
        files.push_back(std::move(f));
      } else if (d < save.optim_ranks) {
        files.push_back(
            file_entry(optim_shard_file(r), d, t, {"exp_avg", "exp_avg_sq"}, optim_shard));
      }
    }
  }
  // EP rank e's expert region [B, F) of its own flat layout.
  for (int e = 0; save.ep > 1 && e < save.ep; ++e) {
    const auto region = range_json(flat.expert_begin(), flat.numel());
    files.push_back({{"file", model_expert_file(e)},
                     {"rank", e},
                     {"ep_rank", e},
                     {"tensors", {"params"}},
                     {"flat", region}});
    files.push_back({{"file", optim_expert_file(e)},
                     {"rank", e},
                     {"ep_rank", e},
                     {"tensors", {"exp_avg", "exp_avg_sq"}},
                     {"flat", region}});
  }
  const std::string dtype = core::safetensors_dtype_name(flat.options().dtype().toScalarType());
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, const optim::ParamSegment*> by_name;
  for (const auto& seg : flat.segments()) by_name[seg.name] = &seg;
  auto flat_entry = [&](const std::string& name, const std::string& in,
                        const optim::ParamSegment& seg) {
    nlohmann::json e = {
        {"name", name}, {"in", in}, {"segment", seg.name}, {"shape", seg.shape}, {"dtype", dtype}};
    const auto range = range_json(seg.offset, seg.offset + seg.numel);
    if (save.ep > 1 && seg.expert) {
      // EP rank e holds experts [e n_local, (e+1) n_local) of the stack at the same offset.
      const int64_t n_local = seg.shape.at(0);
      e["shape"][0] = n_local * save.ep;
      nlohmann::json slices = nlohmann::json::array();
      for (int r = 0; r < save.ep; ++r) {
        slices.push_back({{"ep_rank", r},
                          {"flat", range},
                          {"dim", 0},
                          {"ranges", {range_json(r * n_local, (r + 1) * n_local)}}});
      }
      e["slices"] = std::move(slices);
      return e;
    }
    auto split = save.tp_splits.find(seg.name);
    if (split == save.tp_splits.end()) {
      e["flat"] = range;  // whole on every TP rank: TP rank 0's copy
      return e;
    }
    // Split: TP rank t's flat range holds its local tensor (the whole shape with `dim` cut to
    // its ranges, concatenated), at the same offset on every TP rank.
    e["shape"] = split->second.whole_shape;
    nlohmann::json slices = nlohmann::json::array();
    for (size_t t = 0; t < split->second.ranges_by_rank.size(); ++t) {
      nlohmann::json ranges = nlohmann::json::array();
      for (const auto& [b, end] : split->second.ranges_by_rank[t]) {
        ranges.push_back(range_json(b, end));
      }
      slices.push_back({{"tp_rank", static_cast<int>(t)},
                        {"flat", range},
                        {"dim", split->second.dim},
                        {"ranges", std::move(ranges)}});
    }
    e["slices"] = std::move(slices);
    return e;
  };
  // The model's tensors in model.safetensors' order, then the objective's.
  for (const auto& [name, t] : checkpoint_model_tensors(model)) {
    auto it = by_name.find(name);
    if (it != by_name.end()) {
      tensors.push_back(flat_entry(name, "model.safetensors", *it->second));
    } else {
      tensors.push_back({{"name", name},
                         {"in", "model.safetensors"},
                         {"shape", t.sizes().vec()},
                         {"dtype", core::safetensors_dtype_name(t.scalar_type())},
                         {"file", model_shard_file(0)}});
    }
  }
  const std::string& prefix = save.objective_prefix;
  for (const auto& seg : flat.segments()) {
    if (prefix.empty() || !starts_with_prefix(seg.name, prefix)) continue;
    tensors.push_back(flat_entry(seg.name.substr(prefix.size()), "objective.safetensors", seg));
  }
  // Format 2: expert stacks in EP slices, which a reader of format 1 would take for TP rank
  // 0's; without expert parallelism the layout stays format 1.
  nlohmann::json out = {{"format", save.ep > 1 ? 2 : 1},
                        {"zero", save.zero},
                        {"world_size", save.world_size},
                        {"shard_group_size", save.shard_ranks},
                        {"tp", save.tp},
                        {"flat_numel", flat.numel()},
                        {"files", std::move(files)},
                        {"tensors", std::move(tensors)}};
  if (save.ep > 1) out["ep"] = save.ep;
  return out;
}

}  // namespace lmtrain::train
