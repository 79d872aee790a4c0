#include "optim/flat_params.h"

#include <algorithm>

#include "core/crc32c.h"
#include "core/error.h"

namespace lmtrain::optim {
namespace {
constexpr int64_t kAlign = 16;  // elements: 64-byte aligned segment starts for SIMD
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

FlatParams::FlatParams(torch::nn::Module& module, const model::ParamTags& tags,
                       int64_t pad_multiple) {
  build(
      module,
      [&](const std::string& name) {
        auto it = tags.find(name);
        if (it == tags.end()) throw Error("internal: parameter '" + name + "' has no tag");
        return it->second;
      },
      pad_multiple);
}

FlatParams::FlatParams(torch::nn::Module& module,
                       const std::function<bool(const std::string&)>& decays,
                       int64_t pad_multiple) {
  build(
      module,
      [&](const std::string& name) {
        model::ParamTag tag;
        tag.decay = decays(name);
        return tag;
      },
      pad_multiple);
}

void FlatParams::build(torch::nn::Module& module,
                       const std::function<model::ParamTag(const std::string&)>& tag_of,
                       int64_t pad_multiple) {
  auto named = module.named_parameters(/*recurse=*/true);
  // Reverse registration order: modules register in forward order, so this is roughly the
  // order in which backward finishes each gradient.
  // Only trainable parameters: frozen ones (e.g. a LoRA base) stay ordinary tensors without
  // gradient, so they get no optimizer state and no gradient sync.
  std::vector<std::pair<std::string, torch::Tensor>> ordered;
  for (const auto& item : named) {
    if (tag_of(item.key()).trainable) ordered.emplace_back(item.key(), item.value());
  }
  std::reverse(ordered.begin(), ordered.end());
  // Expert stacks last (stable: each part keeps the backward order).
  std::stable_partition(ordered.begin(), ordered.end(),
                        [&](const auto& item) { return !tag_of(item.first).expert; });
  int64_t offset = 0;
  bool in_experts = false;
  torch::TensorOptions opts =
      named.is_empty() ? torch::TensorOptions() : named.values().front().options();
  for (auto& [name, p] : ordered) {
    ParamSegment seg;
    seg.name = name;
    seg.offset = offset;
    seg.numel = p.numel();
    seg.shape = p.sizes().vec();
    const auto tag = tag_of(name);
    if (tag.expert && !in_experts) {
      in_experts = true;
      expert_begin_ = offset;
    }
    seg.decay = tag.decay;
    seg.block_matrix = tag.block_matrix;
    seg.expert = tag.expert;
    const int64_t end = align_up(offset + seg.numel);
    if (seg.decay) {
      if (!decay_ranges_.empty() && decay_ranges_.back().second == offset) {
        decay_ranges_.back().second = end;  // extends the previous range
      } else {
        decay_ranges_.emplace_back(offset, end);
      }
    }
    offset = end;
    segments_.push_back(seg);
    opts = p.options();
  }
  const int64_t multiple = std::max<int64_t>(1, pad_multiple);
  const int64_t total = (offset + multiple - 1) / multiple * multiple;
  if (!in_experts) expert_begin_ = total;
  params_ = torch::zeros({total}, opts.requires_grad(false));
  grads_ = torch::zeros({total}, opts.requires_grad(false));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < ordered.size(); ++i) {
    auto& p = ordered[i].second;
    const auto& seg = segments_[i];
    auto pv = view(params_, seg);
    pv.copy_(p);
    p.set_data(pv);
    // A defined gradient makes autograd accumulate in place into our buffer.
    p.mutable_grad() = view(grads_, seg);
  }
}

int64_t FlatParams::num_parameters() const {
  int64_t n = 0;
  for (const auto& s : segments_) n += s.numel;
  return n;
}

torch::Tensor FlatParams::view(const torch::Tensor& flat, const ParamSegment& seg) const {
  return flat.narrow(0, seg.offset, seg.numel).view(seg.shape);
}

const ParamSegment& FlatParams::segment(const std::string& name) const {
  for (const auto& s : segments_) {
    if (s.name == name) return s;
  }
  throw Error("no parameter named '" + name + "'");
}

std::string FlatParams::layout_signature() const {
  std::string desc;
  for (const auto& s : segments_) {
    desc += s.name + ":" + std::to_string(s.offset) + ":" + std::to_string(s.numel) + ";";
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", core::crc32c(desc));
  return buf;
}

at::Tensor FlatParams::grad_norm() const { return grads_.norm().to(torch::kFloat64); }

}  // namespace lmtrain::optim
