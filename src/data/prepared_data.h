// The files `lmtrain prepare` writes into a data dir (tokenizer.json, train.bin, val.bin), as
// every command that reads one finds and checks them.
#pragma once
#include <string>

namespace lmtrain::data {

class TokenShard;

// DIR/name; a UsageError naming data.dir when DIR is empty or the file is missing.
std::string require_data_file(const std::string& dir, const std::string& name);

// An Error naming the shard when it was made with another tokenizer than `tokenizer_hash`.
void check_shard_hash(const TokenShard& shard, const std::string& path,
                      const std::string& tokenizer_hash);

}  // namespace lmtrain::data
