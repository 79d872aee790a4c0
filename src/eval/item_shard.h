// Which items of an evaluation this process scores when `lmtrain eval` runs on several ranks
// (torchrun-style launch): item i belongs to rank i % world. The others' results stay default
// and the command sums every rank's into one (cli/eval_ranks.h), so N ranks report what one
// rank would.
#pragma once
#include <cstdint>

namespace lmtrain::eval {

struct ItemShard {
  int rank = 0;
  int world = 1;
  bool owns(int64_t item) const { return item % world == rank; }
};

}  // namespace lmtrain::eval
