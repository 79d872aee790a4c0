#include "data/prepared_data.h"

#include <filesystem>

#include "core/error.h"
#include "data/token_split.h"

namespace lmtrain::data {

std::string require_data_file(const std::string& dir, const std::string& name) {
  if (dir.empty()) {
    throw UsageError(
        "config key 'data.dir' is empty: point it at a directory written by "
        "`lmtrain prepare` (--data.dir=DIR)");
  }
  const std::string path = dir + "/" + name;
  if (!std::filesystem::exists(path)) {
    throw UsageError("config key 'data.dir' = '" + dir + "': " + name +
                     " not found (run `lmtrain prepare --output " + dir + "` first)");
  }
  return path;
}

void check_shard_hash(const TokenSplit& split, const std::string& tokenizer_hash) {
  if (split.tokenizer_hash() != tokenizer_hash) {
    throw Error("token shard " + split.path() + " was made with tokenizer " +
                split.tokenizer_hash() + " but tokenizer.json is " + tokenizer_hash +
                ": re-run `lmtrain prepare`");
  }
}

}  // namespace lmtrain::data
