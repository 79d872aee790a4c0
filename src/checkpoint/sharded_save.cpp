#include "checkpoint/sharded_save.h"

#include <map>
#include <set>

#include "checkpoint/lora_checkpoint.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace lmtrain::train {
namespace {

bool starts_with_prefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

int64_t shard_numel_of(const ShardedSave& save) { return save.flat->numel() / save.shard_ranks; }

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

}  // namespace

std::string model_shard_file(int rank) {
  return "model.rank" + std::to_string(rank) + ".safetensors";
}

void write_model_shard(const std::string& run_dir, int64_t step, int rank,
                       const optim::FlatParams& flat, int64_t begin, int64_t size) {
  const std::string staging = CheckpointStore::staging_dir(run_dir, step);
  core::ensure_dir(staging);
  core::write_safetensors(staging + "/" + model_shard_file(rank),
                          {{"params", flat.param_slice(begin, size)}}, {{"format", "pt"}});
}

TensorList rank0_model_shard(const ShardedSave& save, const model::GptImpl& model) {
  TensorList out{{"params", save.flat->param_slice(0, shard_numel_of(save))}};
  for (auto& item : non_flat_model_tensors(save, model)) out.push_back(std::move(item));
  return out;
}

nlohmann::json model_shards_meta(const ShardedSave& save, const model::GptImpl& model) {
  const optim::FlatParams& flat = *save.flat;
  const int64_t shard = shard_numel_of(save);
  nlohmann::json files = nlohmann::json::array();
  for (int r = 0; r < save.shard_ranks; ++r) {
    const auto range = nlohmann::json::array({r * shard, (r + 1) * shard});
    files.push_back({{"file", model_shard_file(r)},
                     {"rank", r},
                     {"tensors", nlohmann::json::array({"params"})},
                     {"flat", range}});
    files.push_back({{"file", "optim.rank" + std::to_string(r) + ".safetensors"},
                     {"rank", r},
                     {"tensors", nlohmann::json::array({"exp_avg", "exp_avg_sq"})},
                     {"flat", range}});
  }
  const std::string dtype = core::safetensors_dtype_name(flat.options().dtype().toScalarType());
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, const optim::ParamSegment*> by_name;
  for (const auto& seg : flat.segments()) by_name[seg.name] = &seg;
  auto flat_entry = [&](const std::string& name, const std::string& in,
                        const optim::ParamSegment& seg) {
    return nlohmann::json{{"name", name},
                          {"in", in},
                          {"segment", seg.name},
                          {"shape", seg.shape},
                          {"dtype", dtype},
                          {"flat", nlohmann::json::array({seg.offset, seg.offset + seg.numel})}};
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
  return {{"format", 1},
          {"zero", save.zero},
          {"world_size", save.world_size},
          {"shard_group_size", save.shard_ranks},
          {"tp", 1},
          {"flat_numel", flat.numel()},
          {"files", std::move(files)},
          {"tensors", std::move(tensors)}};
}

}  // namespace lmtrain::train
