// A logical file's tensors (model.safetensors, objective.safetensors) from a sharded
// checkpoint's shards (checkpoint/sharded_reader.h): all of them assembled, or one at a time.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>

#include "checkpoint/sharded_reader.h"
#include "core/error.h"
#include "core/safetensors_slice.h"

namespace lmtrain::train {

namespace {

// The tensor of "tensors" entry `t` (of logical file `logical_file`): from the flat shards or
// slices (this rank's part with `local`), or whole from the file that holds it.
at::Tensor read_sharded_tensor(const std::string& dir, const nlohmann::json& meta,
                               const nlohmann::json& t, const TensorLocalizer& local) {
  const std::string name = t.at("name").get<std::string>();
  if (t.contains("flat") || t.contains("slices")) {
    return local ? read_local_shard_entry(dir, meta, t, "params", name, local)
                 : read_shard_entry(dir, meta, t, "params");
  }
  if (t.contains("file")) {
    const std::string file = t["file"].get<std::string>();
    if (!std::filesystem::is_regular_file(dir + "/" + file)) {
      throw Error("checkpoint " + dir + ": shard file " + file + " is missing" +
                  shard_file_note(meta, file));
    }
    return core::read_safetensors_slice(dir + "/" + file, name);
  }
  throw Error("checkpoint " + dir + ": tensor '" + name +
              "' is stored in a way this lmtrain does not read (no \"flat\", \"slices\" or "
              "\"file\")");
}

}  // namespace

core::SafetensorsFile assemble_sharded_file(const std::string& dir, const nlohmann::json& meta,
                                            const std::string& logical_file,
                                            const TensorLocalizer& local) {
  core::SafetensorsFile out;
  for (const auto& t : model_shards_of(meta).at("tensors")) {
    if (t.at("in").get<std::string>() != logical_file) continue;
    const std::string name = t.at("name").get<std::string>();
    out.names.push_back(name);
    out.tensors.emplace(name, read_sharded_tensor(dir, meta, t, local));
  }
  if (out.names.empty()) {
    throw Error("checkpoint " + dir + " has no " + logical_file + " among its shards");
  }
  return out;
}

TensorByName sharded_tensor_reader(const std::string& dir, const nlohmann::json& meta,
                                   const std::string& logical_file, const TensorLocalizer& local) {
  std::map<std::string, const nlohmann::json*> entries;
  for (const auto& t : model_shards_of(meta).at("tensors")) {
    if (t.at("in").get<std::string>() == logical_file)
      entries[t.at("name").get<std::string>()] = &t;
  }
  if (entries.empty()) {
    throw Error("checkpoint " + dir + " has no " + logical_file + " among its shards");
  }
  return [dir, &meta, entries, local](const std::string& name) -> std::optional<at::Tensor> {
    auto it = entries.find(name);
    if (it == entries.end()) return std::nullopt;
    return read_sharded_tensor(dir, meta, *it->second, local);
  };
}

}  // namespace lmtrain::train
