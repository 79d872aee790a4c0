// Moves every trainable parameter of a model into one contiguous fp32 buffer (and its gradient into
// another), leaving each parameter a view of its slice. The optimizer then updates the whole
// model in a handful of vectorised ops instead of a loop over dozens of small tensors, gradient
// zeroing and clipping become one op each, and gradient-sync buckets are plain slices.
// Layout: parameters in reverse registration order — the order in which backward completes
// their gradients, so gradient buckets (contiguous slices, distributed/grad_sync.h) fill front to
// back while backward runs. Each segment starts 16-element aligned; the padding stays zero.
// `decay_ranges` lists the merged [begin, end) element ranges that get weight decay.
// Frozen parameters (tag trainable=false) are left out: they keep their own storage.
// With tags, expert parameters come last, in a region of their own [expert_begin(), numel()):
// under expert parallelism they are averaged over another group than the rest. expert_begin()
// is padded to the pad multiple like the end, so the shared region alone also splits evenly
// into shards (ZeRO shards only that region under expert parallelism).
// The trained parameters may come from several modules (ParamSource): the model, and modules an
// objective trains beside it (distillation's feature projections), named under a prefix.
#pragma once
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/param_tags.h"

namespace lmtrain::optim {

struct ParamSegment {
  std::string name;
  int64_t offset = 0;  // in elements, into FlatParams::params
  int64_t numel = 0;
  std::vector<int64_t> shape;
  bool decay = false;
  bool block_matrix = false;  // tag: a transformer block's matrix (Muon's group)
  bool expert = false;        // tag: a stack of per-expert tensors (dim 0: local experts)
  model::LrGroup lr_group = model::LrGroup::kBase;  // tag: Muon's AdamW learning rate
};

// One module whose trainable parameters join the buffers, its names prefixed with `prefix`
// (e.g. "objective."; empty for the model itself).
struct ParamSource {
  std::string prefix;
  torch::nn::Module* module = nullptr;
  model::ParamTags tags;  // by the module's own (unprefixed) names
};

// The signature FlatParams::layout_signature() gives a layout of these segments.
std::string layout_signature(const std::vector<ParamSegment>& segments, bool shared_only = false);
// Sets the offsets of `segments` (names and numels given, in layout order) as FlatParams lays
// out parameters without expert stacks: each start 16-element aligned. Rebuilds one process's
// layout from a tensor-parallel rank's (checkpoint/unsharded_local_read.h).
void lay_out_segments(std::vector<ParamSegment>& segments);

// Whether FlatParams allocates the whole gradient buffer. kNone: ZeRO-3 over several ranks,
// where FullyShard gives each unit a gradient buffer of its own and keep_shard() the shard's,
// so a whole one would never be written and would only add 4 bytes per parameter to the
// set-up's peak memory; the parameters' .grad stay undefined until FullyShard sets them, and
// grads() / grad_slice() refuse until keep_shard().
enum class GradBuffer { kWhole, kNone };

// ZeRO-3's sharded set-up (parallel/sharded_init.h): the layout without any whole buffer. Only
// shard `rank` of `ranks` is allocated (zeros, in `options`: the device's fp32) with its
// gradient shard, and, keep_experts, the expert region [expert_begin, numel) whole; the
// parameters are left as they are (built unwritten on the CPU) until FullyShard points them
// into their units, so the caller writes the shard's values (param_slice) before then.
struct ShardOnly {
  int rank = 0;
  int ranks = 1;
  bool keep_experts = false;
  torch::TensorOptions options;
};

class FlatParams {
 public:
  // The buffers are padded with zeros to a multiple of `pad_multiple` elements (16 * world
  // size makes them split evenly into 16-aligned shards for a sharded optimizer).
  // Decay, Muon group and expert flags from the model's parameter tags.
  FlatParams(torch::nn::Module& module, const model::ParamTags& tags, int64_t pad_multiple = 16,
             GradBuffer grads = GradBuffer::kWhole);
  // Several modules in one layout: each source's parameters in reverse registration order,
  // later sources first (they run last in forward, so backward reaches them first), then the
  // expert stacks.
  explicit FlatParams(const std::vector<ParamSource>& sources, int64_t pad_multiple = 16,
                      GradBuffer grads = GradBuffer::kWhole);
  // Born sharded (ShardOnly above): shard_only() from the start, nothing whole allocated.
  FlatParams(const std::vector<ParamSource>& sources, int64_t pad_multiple, const ShardOnly& shard);
  // Only the decay flag (tests of the optimizers on plain modules).
  FlatParams(torch::nn::Module& module, const std::function<bool(const std::string&)>& decays,
             int64_t pad_multiple = 16);

  const std::vector<ParamSegment>& segments() const { return segments_; }
  // The parameter of each segment (views into params()), in segment order.
  const std::vector<torch::Tensor>& tensors() const { return tensors_; }
  // The whole buffers; undefined once keep_shard() let them go (ZeRO-3), and grads() from the
  // start under GradBuffer::kNone.
  const torch::Tensor& params() const { return params_; }  // (numel,)
  const torch::Tensor& grads() const { return grads_; }    // (numel,)
  int64_t numel() const { return numel_; }
  const std::vector<std::pair<int64_t, int64_t>>& decay_ranges() const { return decay_ranges_; }
  int64_t num_parameters() const;  // real elements, without alignment padding
  // Start of the expert region (numel() when there are no expert parameters).
  int64_t expert_begin() const { return expert_begin_; }
  // Views of a flat-layout tensor (params, grads, optimizer state): [0, expert_begin) and
  // [expert_begin, numel).
  torch::Tensor shared_region(const torch::Tensor& flat) const {
    return flat.narrow(0, 0, expert_begin_);
  }
  torch::Tensor expert_region(const torch::Tensor& flat) const {
    return flat.narrow(0, expert_begin_, flat.numel() - expert_begin_);
  }
  // Under expert parallelism this rank's expert tensors hold experts [first, first + count) of
  // a larger stack: state saved for the whole stack is sliced there on load.
  void set_expert_first(int64_t first) { expert_first_ = first; }
  int64_t expert_first() const { return expert_first_; }

  // Views of one parameter's slice of `flat` (params, grads or an optimizer state buffer).
  torch::Tensor view(const torch::Tensor& flat, const ParamSegment& seg) const;
  const ParamSegment& segment(const std::string& name) const;

  // Identifies the layout (names, offsets, sizes) of every segment, or of the shared region's
  // only: flat optimizer shards saved under another signature belong to a different model.
  std::string layout_signature(bool shared_only = false) const;

  // ZeRO-3 (parallel/fully_shard.h): keeps elements [begin, begin + size) of the parameter
  // buffer as this rank's fp32 master shard, with a zeroed gradient shard as large, and lets go
  // of the whole buffers (their memory is freed once nothing views them: the caller has pointed
  // the parameters elsewhere first). numel(), segments and offsets keep the whole layout.
  // keep_experts (ZeRO-3 under expert parallelism): the expert region [expert_begin, numel)
  // stays whole too, in buffers of its own that the expert parameters and their .grad view
  // (the gradients zeroed: nothing has run backward yet).
  // Memory: the shard is copied out while the whole parameter buffer lives, so the peak here
  // is the whole model plus this rank's shards (parameters and gradients).
  void keep_shard(int64_t begin, int64_t size, bool keep_experts = false);
  bool shard_only() const { return shard_only_; }
  // After keep_shard() / ShardOnly: this rank's [shard_begin, + shard_numel) of the layout, and
  // whether the expert region is kept whole beside it.
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_numel() const { return shard_params_.defined() ? shard_params_.numel() : 0; }
  bool experts_kept() const { return expert_params_.defined(); }
  // Elements [begin, begin + n) of the parameter / gradient buffer: views of the whole buffers,
  // or of the shard after keep_shard() (then the range must lie inside it, or inside a kept
  // expert region).
  torch::Tensor param_slice(int64_t begin, int64_t n) const;
  torch::Tensor grad_slice(int64_t begin, int64_t n) const;
  // The expert region of the parameters / gradients, (numel - expert_begin,): views of the
  // whole buffers, or of the region keep_shard(..., keep_experts) kept.
  torch::Tensor expert_params() const { return param_slice(expert_begin_, numel_ - expert_begin_); }
  torch::Tensor expert_grads() const { return grad_slice(expert_begin_, numel_ - expert_begin_); }
  torch::TensorOptions options() const { return options_; }

  void zero_grad();
  // L2 norm of all gradients: float64 scalar tensor on the buffers' device.
  at::Tensor grad_norm() const;

 private:
  // (full name, parameter, tag) of every trainable parameter, in layout order.
  struct Entry {
    std::string name;
    torch::Tensor param;
    model::ParamTag tag;
  };
  // Appends the trainable parameters of `module` in reverse registration order.
  static void append_trainable(torch::nn::Module& module, const std::string& prefix,
                               const std::function<model::ParamTag(const std::string&)>& tag_of,
                               std::vector<Entry>& out);
  // `fallback`: the buffers' options when nothing is trainable. `shard`: ShardOnly's layout.
  void build(std::vector<Entry> entries, int64_t pad_multiple, torch::TensorOptions fallback,
             GradBuffer grads, const ShardOnly* shard = nullptr);
  static std::vector<Entry> entries_of(const std::vector<ParamSource>& sources);
  // keep_shard's buffers; `from_whole`: copied out of params_, else zeros.
  void make_shard_buffers(int64_t begin, int64_t size, bool keep_experts, bool from_whole);
  std::vector<ParamSegment> segments_;
  std::vector<torch::Tensor> tensors_;
  torch::Tensor params_, grads_;
  std::vector<std::pair<int64_t, int64_t>> decay_ranges_;
  int64_t expert_begin_ = 0;
  int64_t expert_first_ = 0;
  int64_t numel_ = 0;
  torch::TensorOptions options_;
  // keep_shard(): this rank's [shard_begin_, + shard_params_.numel()) of the buffers.
  bool shard_only_ = false;
  int64_t shard_begin_ = 0;
  torch::Tensor shard_params_, shard_grads_;
  torch::Tensor expert_params_, expert_grads_;  // keep_shard(..., keep_experts): the region
};

}  // namespace lmtrain::optim
