// One split (train or val) of a prepared data dir as one sequence of tokens, whatever the
// number of files it was written in:
//   DIR/train.bin                          one shard (what prepare wrote before pieces)
//   DIR/train_00000.bin, train_00001.bin   pieces, concatenated in order (out-of-core prepare)
// Token i of the split is token i of the concatenation, so the windows over a one-file split
// are exactly the windows over its one shard, and a window may span two pieces.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace lmtrain::data {

// DIR/<split>_00000.bin ... in order, or {DIR/<split>.bin}. Empty when neither exists. Throws
// lmtrain::Error when both exist (which to read would be ambiguous), when the pieces have a
// gap, or when DIR/prepare.json records another number of pieces than are there.
std::vector<std::string> split_piece_paths(const std::string& dir, const std::string& split);

// The name of piece `index` of a split: "train_00042.bin".
std::string split_piece_name(const std::string& split, size_t index);

class TokenSplit {
 public:
  // Opens every piece (memory-mapped). All must have the same dtype and tokenizer hash.
  explicit TokenSplit(std::vector<std::string> piece_paths);
  // The split `split` ("train", "val") of data dir `dir`; a UsageError naming data.dir when
  // the dir is empty or holds neither form (as require_data_file).
  static TokenSplit open(const std::string& dir, const std::string& split);

  // "DIR/train.bin", or "DIR/train_00000.bin .. train_00011.bin (12 pieces)": for messages.
  const std::string& path() const { return description_; }
  size_t size() const { return offsets_.back(); }
  int dtype_bytes() const { return pieces_.front().dtype_bytes(); }
  const std::string& tokenizer_hash() const { return pieces_.front().tokenizer_hash(); }
  const std::vector<TokenShard>& pieces() const { return pieces_; }
  std::vector<std::string> piece_paths() const;

  // As TokenShard::set_vocab_size, for every piece.
  void set_vocab_size(size_t vocab_size);
  // Token i of the split; throws if i >= size().
  uint32_t at(size_t i) const;
  // out[k] = token(start + k) for k < len, across piece boundaries; throws if the window
  // leaves the split.
  void copy_window(size_t start, size_t len, int64_t* out) const;

 private:
  std::vector<TokenShard> pieces_;
  std::vector<size_t> offsets_;  // first token of each piece, then the total
  std::string description_;
};

}  // namespace lmtrain::data
