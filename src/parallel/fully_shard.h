// ZeRO-3 / FSDP (dist.zero=3): parameters sharded over the data-parallel group, gathered one
// unit at a time where forward and backward need them, applied from outside the model (the
// way torchtitan applies fully_shard per block): the model only calls the BlockHooks this
// installs (model/block_hooks.h) and makes no collective call.
//
// Layout: ZeRO-2's. The flat buffers (optim/flat_params.h, padded to 16 * ranks) are cut into
// one equal shard of S elements per rank; FlatParams::keep_shard keeps only this rank's fp32
// shard of parameters and gradients, which ZeroAdamW (stage 3) updates as under ZeRO-2. Units
// (parallel/shard_units.h): unit 0 = embeddings, tied head, final norm; unit 1 + i = block i,
// an MoE block's router and experts included (under dist.ep > 1 its expert stacks stay local
// and whole, outside the units: parallel/moe_shard.h).
// Each unit has a gathered parameter buffer and a gradient buffer (its numel,); the model's
// parameters are views of the first, their .grad views of the second. Between uses both
// buffers' memory is released (storage resized to 0), not merely dropped from scope.
//
// A step (TrainStepper):
//   begin_micro_step: the root unit is gathered (it stays for the whole step: the embeddings
//     start forward and end backward, the head ends forward and starts backward), block 0's
//     gather is issued;
//   forward, block L: wait for L's gather, issue L+1's (prefetch), run, free L's parameters
//     (dist.reshard_after_forward; else they stay until L's backward);
//   backward, block L: its output's gradient hook waits for L's gather (issued as prefetch by
//     block L+1's backward, or here) and issues L-1's; the hook on its input's gradient fires
//     once all of L's gradients are accumulated: L's parameters are freed and, on the last
//     micro-step, its gradient buffer is reduce-scattered into the shard (Group::reduce_scatter,
//     averaged: ZeRO-2's arithmetic, so ZeRO-3 equals ZeRO-2 bit for bit);
//   finish: the root's reduce-scatter, the waits, every buffer released.
// Gradient accumulation: each unit's unsharded gradient buffer is kept across the micro-steps
// and reduce-scattered once, on the last (traffic of one step; the gradient memory of an
// unsharded model, 4 bytes per parameter, while accumulating); without accumulation a unit's
// gradient buffer lives from its backward until the next unit's reduce-scatter is launched.
// Gathered parameters at any time: the root plus at most two blocks (the one computing and
// the one prefetched). Collectives are issued in the same order on every rank, as the hooks
// fire in the graph's order.
//
// HSDP (dist.shard_group_size): `group` is this rank's shard group; `replicas` (the ranks
// holding the same shard in the other groups) all-reduce the reduce-scattered shard gradients.
//
// Gathering in the compute dtype (`wire_dtype`, bf16 runs): the blocks' linear weights (tag
// block_matrix; not an MoE router's, read in fp32), which autocast casts to bf16 before every
// use anyway, travel as bf16 and are widened into the fp32 unit buffer on arrival, so each
// matmul sees the very bf16 values it would under ZeRO-2 and ZeRO-3 stays bit for bit
// ZeRO-2's, with half the bytes for those gathers. Everything else (norms, biases, the root unit's
// embeddings and head, which some kernels read in fp32) stays fp32, exact. Evaluation gathers as
// a step's forward does (begin_forward_only) and sees the same values. The unit buffers stay fp32:
// this saves wire bytes, not gathered memory (FSDP2's param_dtype also keeps the gathered
// parameters in bf16; not done).
//
// Frozen parameters (a LoRA base: no gradient, no optimizer state) are sharded too, per unit
// (parallel/frozen_shard.h), and gathered, kept and freed with their unit's trained ones (the
// blocks' frozen linear weights in wire_dtype too).
//
// train.grad_reduce_dtype=bf16 (set_reduce_dtype): a unit's gradient buffer, divided by the
// world size in fp32, travels as a bf16 copy and this rank's summed piece is widened into the
// fp32 gradient shard: ZeRO-2's GradSync arithmetic in bf16, half the reduce-scatter bytes.
// HSDP's replica all-reduce of the shard goes in bf16 too. Master weights and shards stay fp32.
//
// On one rank nothing of this is made (ZeRO-3 is then ZeRO-2: no gathers, no copies).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "distributed/group.h"
#include "model/block_hooks.h"
#include "model/gpt.h"
#include "optim/flat_params.h"
#include "parallel/in_flight.h"
#include "parallel/shard_units.h"

namespace lmtrain::parallel {

class FrozenShard;

// The wire dtype of a run's ZeRO-3 gathers: bf16 where autocast computes in bf16
// (train.precision=bf16; fp16 and fp8 cast fp32 weights straight to their own dtype, which a
// bf16 copy would round twice) without tensor parallelism (its layers are not checked for it).
std::optional<at::ScalarType> gather_dtype_for(core::Precision precision, bool tensor_parallel);

// Bytes of model state held by this rank, by kind.
struct ShardBytes {
  int64_t param_shard = 0;        // fp32 master shard (and, under EP, this rank's experts)
  int64_t grad_shard = 0;         // fp32 gradient shard (likewise)
  int64_t gathered_peak = 0;      // block units' gathered parameters, at most at once
  int64_t root_gathered = 0;      // the root unit's gathered parameters (held during a step)
  int64_t largest_block = 0;      // the largest block unit's gathered bytes
  int64_t grad_buffers_peak = 0;  // unit gradient buffers, at most at once
  // Frozen parameters (gathered_peak, root_gathered and largest_block count them too).
  int64_t frozen_shard = 0;  // this rank's pieces
  int64_t frozen_whole = 0;  // unsharded
};

class FullyShard : public model::BlockHooks {
 public:
  // Shards `flat` (its whole buffers freed) after every parameter is pointed into its unit,
  // one unit's buffers made and released at a time (set-up holds the model once, one unit and
  // the shards; build `flat` with optim::GradBuffer::kNone to spare its whole gradients);
  // this rank keeps shard group.rank() of group.size(), the optimizer's (ZeroAdamW stage 3 over
  // the same group). `replicas`: HSDP, else null. Collective-free; `model`'s parameters must be
  // flat's (the same on every rank: sync_replicas first).
  // wire_dtype: at::kBFloat16 to gather the blocks' linear weights in bf16 (above); only for
  // runs whose autocast computes in bf16 (train.precision=bf16, no tensor parallelism).
  // local_experts: expert parallelism; the expert stacks stay whole on each rank, outside the
  // units, and only [0, expert_begin) is sharded (parallel/moe_shard.h).
  // frozen_source: the sharded set-up's frozen values (a LoRA base read by range,
  // parallel/frozen_shard.h), put on flat's device; none: the frozen parameters' own.
  FullyShard(model::GptImpl& model, optim::FlatParams& flat, dist::Group& group,
             dist::Group* replicas, bool reshard_after_forward,
             std::optional<at::ScalarType> wire_dtype = std::nullopt, bool local_experts = false,
             const std::function<void(const std::string&, int64_t, const at::Tensor&)>&
                 frozen_source = {});
  ~FullyShard() override;
  FullyShard(const FullyShard&) = delete;
  FullyShard& operator=(const FullyShard&) = delete;

  // The hooks go into the model (held there, without ownership, until uninstall()).
  void install();
  void uninstall();

  // Gradients travel in `dtype` (train.grad_reduce_dtype; fp32 = as the buffers, the default).
  void set_reduce_dtype(at::ScalarType dtype);

  void begin_micro_step(bool last);
  // After the last micro-step's backward: the remaining reduce-scatters, waits, releases.
  // Returns the seconds spent waiting here.
  double finish();

  // Evaluation runs forward only, block by block as a step's forward does: the root unit
  // gathered until end_forward_only(), each block gathered before its forward (the next one
  // prefetched) and released after it (no gradient mode), so a model that fits only sharded is
  // evaluated without ever being whole.
  void begin_forward_only();
  void end_forward_only();

  ShardBytes bytes() const;
  const std::vector<ShardUnit>& units() const { return units_; }

  at::Tensor before_block(int64_t layer, const at::Tensor& x) override;
  std::vector<at::Tensor> after_block(int64_t layer, std::vector<at::Tensor> outputs) override;

 private:
  struct UnitState {
    at::Tensor params, grads;  // (numel,) buffers the model's parameters / .grad view
    InFlight gathering;        // its broadcasts: bf16 pieces widen into `params`
    // Its reduce-scatters. reduce_dtype: the gradient buffer's lowered copy is their source,
    // and per range this rank's summed piece widens into its place in the fp32 gradient shard.
    InFlight reducing;
    bool gathered = false, grads_held = false, reduced = false, pre_backward_done = false;
  };
  void issue_gather(size_t u);
  // Broadcasts flat elements [a, b) of unit u, owned by rank q, into `dest`.
  void gather_piece(size_t u, int64_t a, int64_t b, int q, const at::Tensor& dest);
  void wait_gather(size_t u);
  void release_params(size_t u);
  void hold_grads(size_t u);
  void launch_reduce(size_t u);
  void wait_reduce(size_t u);  // and releases the unit's gradient buffer
  void pre_backward(size_t u);
  void post_backward(size_t u);
  int64_t gathered_block_bytes() const;

  model::GptImpl& model_;
  optim::FlatParams& flat_;
  dist::Group& group_;
  dist::Group* replicas_;
  bool reshard_;
  int64_t shard_ = 0;          // elements per rank
  int64_t local_experts_ = 0;  // elements of the expert region kept whole (EP), else 0
  std::vector<ShardUnit> units_;
  std::optional<at::ScalarType> wire_;
  std::optional<at::ScalarType> reduce_dtype_;  // gradients' wire dtype, if not fp32
  std::unique_ptr<FrozenShard> frozen_;
  // Per unit: the flat ranges that travel as wire_ (its block_matrix segments), increasing.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> lowered_;
  std::vector<UnitState> state_;
  std::vector<size_t> reduce_order_;  // units whose reduce-scatter is in flight, oldest first
  bool last_micro_ = true;
  int64_t gathered_peak_ = 0, grads_peak_ = 0;
};

}  // namespace lmtrain::parallel
