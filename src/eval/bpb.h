// Bits per byte, independent of the tokenizer (nanochat's evaluate_bpb): the summed
// cross-entropy (nats) of every predicted token over ln 2 times the UTF-8 bytes those tokens
// spell. Special tokens spell no text: they are left out of both sums, as nanochat's
// token_bytes of 0 leaves them out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/token_split.h"
#include "eval/item_shard.h"
#include "model/gpt.h"

namespace lmtrain::eval {

struct BpbResult {
  double bpb = 0;
  double nats = 0;     // summed loss of the counted tokens
  int64_t tokens = 0;  // predicted tokens counted (not special)
  int64_t bytes = 0;   // their bytes
  int64_t windows = 0;
};

// Non-overlapping windows of seq_len + 1 tokens (inputs seq_len, targets the next tokens) of
// `tokens`, `batch` windows per forward; at most max_windows (<= 0: all; a last shorter
// window is scored too). Throws UsageError when there is not a single target. shard: score
// only its batches (batch k of `batch` windows is item k): nats, tokens and bytes are then this
// rank's share, bpb is left 0 and windows is the total (finish_bpb after summing the ranks').
BpbResult bits_per_byte(model::GptImpl& model, const data::BpeTokenizer& tok,
                        const std::vector<int64_t>& tokens, int64_t seq_len, int64_t batch,
                        int64_t max_windows, const ItemShard& shard = {});
// bpb from nats and bytes; throws UsageError when no byte was scored.
void finish_bpb(BpbResult& r);

// The tokens of a split (all of them; a split larger than max_tokens is cut there, > 0).
std::vector<int64_t> split_tokens(const data::TokenSplit& split, int64_t max_tokens);

}  // namespace lmtrain::eval
