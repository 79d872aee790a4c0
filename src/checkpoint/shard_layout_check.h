// The structure of meta.json's "model_shards" (checkpoint/sharded_reader.h), checked before any
// reader indexes it: every count an integer in range, every file a plain name of the checkpoint
// directory, every flat range inside the flat layout and as long as its tensor's shape, every
// TP rank (dist.tp) and EP rank (dist.ep) in range and a split tensor's "slices" covering its
// dimension once (a file of optimizer state "by_name" has neither range nor list: its tensors are
// read by name). A damaged or hostile meta.json is then an lmtrain::Error naming the entry, never a
// read outside the checkpoint, a bad allocation or a JSON library exception. Fuzzed by
// fuzz_meta_json.
#pragma once
#include <nlohmann/json.hpp>

namespace lmtrain::train {

void check_model_shards(const nlohmann::json& model_shards);

}  // namespace lmtrain::train
