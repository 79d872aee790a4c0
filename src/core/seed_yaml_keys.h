// The YAML layout of the temporal-encoder pretrainer (its `training:` and `data:` sections),
// read by Config::merge_yaml beside our own sections: each of its keys either sets one of our
// keys or is accepted with a one-line notice saying why it has no effect in lmtrain. Nothing
// is ignored silently; a key of those sections that is in neither list is an error.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::core {

struct SeedYamlKey {
  std::string path;    // their key, "training.num_epochs"
  std::string target;  // our key it sets ("" = none: `why` is printed instead)
  std::string why;     // target "": why it has no effect
};

const std::vector<SeedYamlKey>& seed_yaml_keys();
const SeedYamlKey* find_seed_yaml_key(const std::string& path);
// "training": a section only the seed's YAML has.
bool is_seed_yaml_section(const std::string& name);
// Their value in our key's terms (fp16: true -> train.precision = fp16, false -> fp32).
std::string seed_yaml_value(const SeedYamlKey& key, const std::string& text,
                            const std::string& origin);

}  // namespace lmtrain::core
