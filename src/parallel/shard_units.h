// ZeRO-3's sharding units over the flat layout (optim/flat_params.h), and the storage that a
// unit's gathered parameters and gradients let go of between uses.
//
// Unit 0 is the root: the token and position embeddings, the (tied) head, the final norm and
// whatever an objective trains beside the model; unit 1 + i is transformer block i. Every
// element of the flat layout [0, numel) belongs to one unit: a segment's alignment padding and
// the buffer's tail padding go with the segment before them, so a unit's ranges are contiguous
// runs of the layout (a block's parameters lie back to back in it; the root's sit at both
// ends: the final norm first, the embeddings last). A unit's gathered buffer (numel,) holds its
// ranges back to back, each parameter at its flat offset minus its range's start plus the
// range's place in the buffer, so every parameter keeps the 16-element alignment it has in the
// flat buffers.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "optim/flat_params.h"

namespace lmtrain::parallel {

struct ShardUnit {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) of the flat layout, increasing
  std::vector<size_t> segments;                     // FlatParams::segments() indices, in order
  int64_t numel = 0;                                // elements of the gathered buffer
  // Where element `flat_offset` of the layout (inside one of the ranges) lies in the buffer.
  int64_t buffer_offset(int64_t flat_offset) const;
};

// Unit of a parameter name: 1 + i for "transformer.h.<i>." names, else 0 (the root).
size_t unit_of_name(const std::string& name, int64_t n_layer);

// The units of `flat` for a model of n_layer blocks: n_layer + 1 of them, in unit order.
std::vector<ShardUnit> plan_shard_units(const optim::FlatParams& flat, int64_t n_layer);

// The part of flat range [lo, hi) in shard q of `shard` elements: [a, b), a == b when none.
std::pair<int64_t, int64_t> shard_piece(int64_t lo, int64_t hi, int q, int64_t shard);

// FSDP2's untyped_storage().resize_(0) / resize_(n): frees or re-allocates the memory under a
// tensor and every view of it, leaving the tensors (their shapes, autograd identity and the
// graph's saved references) as they are. restore_storage gives uninitialised memory.
void release_storage(const at::Tensor& t);
void restore_storage(const at::Tensor& t, int64_t nbytes);
bool storage_released(const at::Tensor& t);

}  // namespace lmtrain::parallel
