// The interface the training step drives, so that replicated (AdamW), sharded (ZeRO-1/2
// AdamW) and Muon optimizers are interchangeable. One step is:
//   gradients averaged by dist::GradSync (fully, or reduce-scattered: grad_reduction())
//   -> grad_norm() (global, across shards) -> scale_grads() when clipping -> step(lr).
// Every tensor (parameters, gradients, state) lives on the runtime's device (core/runtime.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "optim/saved_tensors.h"
#include "optim/split_matrices.h"

namespace lmtrain::optim {

// How the gradient buffer must be averaged across ranks before step().
enum class GradReduction {
  kAllReduce,      // every rank needs the whole averaged gradient
  kReduceScatter,  // each rank needs only its shard: [shard_begin(), shard_end())
  kToOwners,       // parameter p's gradient is needed only by grad_owner(p) (-1: by all)
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual std::string name() const = 0;
  virtual GradReduction grad_reduction() const { return GradReduction::kAllReduce; }
  // This rank's shard of the flat buffers (the whole buffer when not sharded).
  virtual int64_t shard_begin() const = 0;
  virtual int64_t shard_end() const = 0;
  // kToOwners: the rank that needs parameter `name`'s gradient, or -1 for every rank.
  virtual int grad_owner(const std::string& name) const {
    (void)name;
    return -1;
  }

  // Tensor parallelism: an optimizer that updates whole matrices (Muon) takes the plan's pieces
  // and returns true; its grad_norm() is then the whole model's. Others return false.
  virtual bool take_split_matrices(std::shared_ptr<SplitMatrices> split) {
    (void)split;
    return false;
  }

  // Global L2 norm of the averaged gradient (may communicate): a float64 scalar tensor on the
  // gradients' device, so a CUDA step never waits for it (clipping stays on the device).
  virtual at::Tensor grad_norm() = 0;
  // Multiplies the gradients this rank updates from by `coef` (a scalar tensor, any device).
  virtual void scale_grads(const at::Tensor& coef) = 0;
  // One update with learning rate `lr` (the AdamW groups' lr; other groups scale from it).
  virtual void step(double lr) = 0;
  // Updates applied (a checkpoint's step). After updates skipped on the device (step_unless)
  // it reads their count from the device, so it waits for it.
  virtual int64_t step_count() const = 0;
  // step() and step_unless() calls, after a load counted from the loaded step_count(): the
  // host's count, read without waiting for the device (e.g. to seed a step's dropout masks).
  // Equals step_count() unless updates were skipped on the device.
  virtual int64_t steps_started() const { return step_count(); }

  // fp16's device-side skip (optim/loss_scaler.h). skips_on_device(): step_unless() exists.
  // step_unless(lr, found_inf): step(lr), unless `found_inf` (a 0-dim float32 tensor on the
  // parameters' device, 0 or 1) is 1: then parameters, state and the device step count stay bit
  // for bit as they were. Decided on the device, nothing read on the host, so a CUDA graph can
  // capture it; it runs the device-scalar path (optim/device_step_scalars.h) on any device.
  virtual bool skips_on_device() const { return false; }
  virtual void step_unless(double lr, const at::Tensor& found_inf) {
    (void)lr;
    (void)found_inf;
    throw Error("internal: optimizer " + name() + " cannot skip an update on the device");
  }
  // Tests: the CPU runs the device-scalar path too (libtorch's fused AdamW), as step_unless()
  // does, so that a run with host-side skips compares bit for bit with device-side ones.
  virtual void use_device_scalars() {}

  // State for this rank's checkpoint file, and the layout that says how to read it back
  // (stored in meta.json). load_state receives every rank's file of a checkpoint (written at
  // any world size) and keeps what this rank needs.
  virtual NamedTensors state_tensors() const = 0;
  virtual nlohmann::json state_layout() const = 0;
  virtual void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                          int64_t step) = 0;
  // The same from a checkpoint's files read by range (optim/saved_tensors.h): an optimizer that
  // keeps part of the state (ZeRO's shard) reads only that part, so a resume holds this rank's
  // state, never the whole model's. The default reads every file whole into load_state.
  virtual void load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                                int64_t step) {
    load_state(saved.read_all(), layout, step);
  }
  // Expert parallelism: the state of this rank's expert stacks by parameter name
  // ("exp_avg.<name>", "exp_avg_sq.<name>"), which checkpointing gathers over the EP group into
  // whole stacks (parallel/expert_parallel.h). Empty without expert parameters.
  virtual NamedTensors expert_state() const { return {}; }
  // Built for expert parallelism (given the EP group): its gradient norm counts the expert
  // region over the group.
  virtual bool expert_parallel() const { return false; }
  // True when each rank holds a different part of the state (one file per rank).
  virtual bool sharded() const { return false; }
  // State every rank holds in full (broadcast from rank 0 at start-up); empty when sharded.
  virtual std::vector<at::Tensor> replicated_state() const = 0;
  // Bytes of optimizer state held by this rank, measured from the tensors.
  virtual int64_t state_bytes() const = 0;

  // CUDA graphs (train/cuda_graph_step.h). graph_safe(): step() reads nothing from the host,
  // its learning rate coming from the device tensor hold_lr() returns. hold_lr(): from now on
  // step() leaves that 0-dim float32 tensor as the caller writes it before each replay (a
  // captured update must not bake in the capture's learning rate). count_replayed_step(): a
  // replay ran one update without running host code; count it.
  virtual bool graph_safe() const { return false; }
  virtual at::Tensor hold_lr() {
    throw Error("internal: optimizer " + name() + " cannot run inside a CUDA graph");
  }
  virtual void count_replayed_step() {}
};

}  // namespace lmtrain::optim
