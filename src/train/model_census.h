// What `lmtrain plan` needs to know of a model's trained parameters, counted without making the
// flat buffers (optim/flat_params.h): the model is built with unwritten weights on the host
// (never-touched pages: a Llama-3-8B or Qwen3-30B-A3B shape costs address space, not memory),
// and each trainable parameter is recorded in the flat layout's order with the 16-element
// alignment FlatParams gives it. The plan then lays these out again for each layout it weighs
// (padding to 16 x shard ranks, tensor-parallel slices, expert-parallel stacks) without building
// anything more, so one census prices every layout of the table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/build_model.h"

namespace lmtrain::train {

struct CensusEntry {
  std::string name;
  int64_t numel = 0;          // elements of the parameter
  int64_t aligned = 0;        // the same rounded up to FlatParams' 16-element segment alignment
  bool tp_split = false;      // split T ways under tensor parallelism (tensor_parallel_slice)
  bool expert = false;        // a (num_experts, ...) stack: split over dist.ep
  bool block_matrix = false;  // a linear weight (tag): ZeRO-3 bf16 runs gather a block's in bf16
  size_t unit = 0;            // ZeRO-3 unit: 0 the root, 1 + i block i (parallel/shard_units.h)
};

struct ModelCensus {
  std::vector<CensusEntry> entries;  // trainable parameters, in the flat layout's order
  // Frozen parameters (a LoRA base), in registration order: outside the flat buffers, whole on
  // every rank, or under ZeRO-3 sharded per unit (parallel/frozen_shard.h).
  std::vector<CensusEntry> frozen;
  int64_t n_layer = 0;
  int64_t num_experts = 0;  // routed experts per MoE layer (0: dense)
  int64_t trained_parameters() const;
};

// Builds the model's census. The model's own checks (shapes, LoRA, MoE) run as in a real run.
ModelCensus take_census(const model::ModelOptions& model);

}  // namespace lmtrain::train
