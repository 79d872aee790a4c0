// Packing for SFT (data.chat.pack): several conversations in one row of data.seq_len tokens,
// kept apart by document masking in attention (model/document_mask.h): no conversation attends
// to another, positions restart at each, so each is trained exactly as if alone in its row,
// with fewer padded slots than one conversation per row.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "objective/objective.h"

namespace lmtrain::train {

// Conversations (their indices, visited in `order`) into rows of at most `capacity` input
// slots, where conversation i takes widths[i] slots (its tokens - 1, cut at capacity; 0 is left
// out). First fit among the last kOpenRows rows still open, so the rows come out in about the
// order's order and a long split packs in linear time. Deterministic.
std::vector<std::vector<int64_t>> pack_conversations(const std::vector<int64_t>& widths,
                                                     const std::vector<int64_t>& order,
                                                     int64_t capacity);

// One packed conversation: its tokens (at most capacity + 1) and target flags (1 = target).
struct PackedPart {
  std::vector<int64_t> ids;
  std::vector<uint8_t> target;
};

// Rows of conversations into a batch on `device`: "inputs", "targets" and "documents" (B, W),
// W = the fullest row's slots rounded up to `bucket`, at most `seq_len`. Each conversation
// takes its tokens - 1 slots (inputs: its tokens but the last; targets: the next token where
// flagged, else model::kIgnoreIndex); "documents" numbers the conversations of a row 0, 1, ...
// and gives the padding after them an index of its own.
Batch packed_chat_batch(const std::vector<std::vector<PackedPart>>& rows, int64_t seq_len,
                        int64_t bucket, const c10::Device& device);

}  // namespace lmtrain::train
