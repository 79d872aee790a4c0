#include "parallel/sharded_init.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "model/param_init.h"

namespace lmtrain::parallel {

std::pair<int64_t, int64_t> held_part(const optim::FlatParams& flat,
                                      const optim::ParamSegment& seg) {
  if (seg.expert && flat.experts_kept()) return {0, seg.numel};
  const int64_t lo = std::max(seg.offset, flat.shard_begin());
  const int64_t hi = std::min(seg.offset + seg.numel, flat.shard_begin() + flat.shard_numel());
  if (lo >= hi) return {0, 0};
  return {lo - seg.offset, hi - seg.offset};
}

void write_segment_part(optim::FlatParams& flat, const optim::ParamSegment& seg, int64_t first,
                        const at::Tensor& values) {
  const auto [a, b] = held_part(flat, seg);
  const int64_t lo = std::max(a, first), hi = std::min(b, first + values.numel());
  if (lo >= hi) return;
  torch::NoGradGuard no_grad;
  flat.param_slice(seg.offset + lo, hi - lo)
      .copy_(values.reshape({-1}).narrow(0, lo - first, hi - lo));
}

void init_shard_from_seed(model::GptImpl& model, optim::FlatParams& flat, bool draw_model) {
  if (!flat.shard_only()) {
    throw Error("internal: init_shard_from_seed: the flat layout is not ShardOnly-built");
  }
  const auto& segs = flat.segments();
  std::map<std::string, size_t> segment_of;
  for (size_t i = 0; i < segs.size(); ++i) segment_of.emplace(segs[i].name, i);
  std::vector<bool> written(segs.size(), false);
  const model::InitWriter write = [&](const std::string& name, at::Tensor& param,
                                      const model::InitFill& fill) {
    // One parameter materialised, on the CPU where the whole-model init draws it.
    auto scratch = at::empty(param.sizes(), at::TensorOptions().dtype(at::kFloat));
    fill(scratch);
    auto it = segment_of.find(name);
    if (it == segment_of.end()) return;  // not trained: drawn for the generator's sake only
    write_segment_part(flat, segs[it->second], 0, scratch);
    written[it->second] = true;
  };
  if (draw_model) {
    model::init_model_weights(model, write);
    model::init_lora_adapter_weights(model, write);  // after the base, as build_model draws them
  }
  const auto& tags = model.param_tags();
  for (size_t i = 0; i < segs.size(); ++i) {
    if (written[i]) continue;
    if (tags.count(segs[i].name)) {
      if (!draw_model) continue;  // the caller's to read
      throw Error("internal: init_shard_from_seed: parameter '" + segs[i].name +
                  "' was not initialised");
    }
    write_segment_part(flat, segs[i], 0, flat.tensors()[i].detach());  // an objective's
  }
}

void place_model_buffers(model::GptImpl& model, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  for (auto& b : model.buffers(/*recurse=*/true)) {
    if (b.device() != device) b.set_data(b.to(device));
  }
}

}  // namespace lmtrain::parallel
