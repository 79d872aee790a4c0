// ZeRO-3's frozen parameters (tag trainable=false: a LoRA base, a temporal run's frozen LM):
// sharded over the same group as the trained ones (parallel/fully_shard.h), with no gradient
// and no optimizer state, gathered with their unit for forward and backward and freed after.
//
// Layout, per unit (parallel/shard_units.h: 0 = embeddings, head, final norm; 1 + i = block i):
// the unit's frozen parameters back to back in registration order, each 16-element aligned,
// the unit padded to a multiple of 16 N elements for N ranks; rank q keeps piece q of it
// (numel / N elements, contiguous), so a unit's gather is one all-gather of equal pieces into
// its buffer (numel,), whose views the model's frozen parameters are. This rank's pieces of
// all units lie back to back in one shard tensor: 1/N of the frozen base (plus padding) once
// the constructor returns. Between uses a unit's buffer holds no memory (release_storage).
// Values travel in their own dtype (fp32 for an fp32 base): an all-gather does no arithmetic,
// so forward and backward see exactly the parameters of an unsharded run. With a wire dtype
// (bf16 runs, parallel::gather_dtype_for) the blocks' frozen linear weights (tag block_matrix),
// which autocast casts to bf16 before every use, travel as bf16 in a part of their own and
// are widened into the buffer on arrival, as FullyShard gathers the trained ones: the same
// bf16 values reach every matmul, for half the bytes. Each unit is then two parts (plain and
// lowered), each laid out and split as above.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/group.h"
#include "model/gpt.h"
#include "parallel/in_flight.h"

namespace lmtrain::parallel {

// Bytes of the model's frozen parameters (0 when everything trains).
int64_t frozen_param_bytes(const model::GptImpl& model);
// The same with each frozen parameter counted as numel_of(name, tensor) elements of its dtype
// (e.g. a tensor-parallel piece at its whole shape).
int64_t frozen_param_bytes(
    const model::GptImpl& model,
    const std::function<int64_t(const std::string& name, const at::Tensor& p)>& numel_of);

// ZeRO-3's sharded set-up (parallel/sharded_init.h) leaves the frozen parameters unwritten:
// each rank's pieces are read from where the base lies (model.init_from, by range) instead.
struct FrozenSource {
  // Writes elements [begin, begin + dest.numel()) of frozen parameter `name`, flattened
  // row-major, into `dest` (1-D, in `options`).
  std::function<void(const std::string& name, int64_t begin, const at::Tensor& dest)> read;
  at::TensorOptions options;  // the shard's and the unit buffers' device and dtype
  explicit operator bool() const { return static_cast<bool>(read); }
};

class FrozenShard {
 public:
  // Points every frozen parameter of `model` into its unit's buffer and keeps this rank's
  // pieces (group.rank() of group.size()); the whole tensors' memory is let go unit by unit.
  // Collective-free; every rank must hold the same frozen values (all load one base).
  // wire_dtype: bf16 to gather the blocks' frozen linear weights in bf16 (above).
  // source: this rank's pieces read from it, the parameters' own values never read.
  FrozenShard(model::GptImpl& model, dist::Group& group, size_t num_units,
              std::optional<at::ScalarType> wire_dtype = std::nullopt,
              const FrozenSource& source = {});
  ~FrozenShard();
  FrozenShard(const FrozenShard&) = delete;
  FrozenShard& operator=(const FrozenShard&) = delete;

  bool empty() const { return whole_bytes_ == 0; }
  // Unit u's buffer re-allocated and its all-gather issued (nothing for a unit without frozen
  // parameters); wait() waits for it; release() waits and frees the buffer.
  void issue(size_t u);
  void wait(size_t u);
  void release(size_t u);

  int64_t shard_bytes() const;                          // this rank's pieces (held all the time)
  int64_t whole_bytes() const { return whole_bytes_; }  // the frozen parameters, unsharded
  int64_t unit_bytes(size_t u) const;                   // unit u's gathered buffer
  size_t num_params() const { return num_params_; }

 private:
  // A run of a unit's buffer split into equal pieces: [offset, offset + numel) of the buffer,
  // this rank's piece at shard_offset of the shard.
  struct Part {
    int64_t offset = 0, numel = 0, piece = 0, shard_offset = 0;
    bool lowered = false;  // travels in the wire dtype
  };
  struct Unit {
    at::Tensor buffer;  // (numel,), released between uses
    int64_t numel = 0;
    std::vector<Part> parts;
    InFlight gathering;  // its all-gathers: lowered pieces widen into the buffer
    bool held = false;
  };
  dist::Group& group_;
  std::optional<at::ScalarType> wire_;
  std::vector<Unit> units_;
  at::Tensor shard_;  // this rank's pieces of every unit, in unit order
  int64_t whole_bytes_ = 0;
  size_t num_params_ = 0;
};

}  // namespace lmtrain::parallel
