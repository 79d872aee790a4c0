// The files `lmtrain prepare` writes into a data dir (tokenizer.json, the train and val splits
// as train_00000.bin ... or, from an older prepare, train.bin: data/token_split.h), as every
// command that reads one finds and checks them.
#pragma once
#include <string>

namespace lmtrain::data {

class TokenSplit;

// DIR/name; a UsageError naming data.dir when DIR is empty or the file is missing.
std::string require_data_file(const std::string& dir, const std::string& name);

// An Error naming the split when it was made with another tokenizer than `tokenizer_hash`.
void check_shard_hash(const TokenSplit& split, const std::string& tokenizer_hash);

}  // namespace lmtrain::data
