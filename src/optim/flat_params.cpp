#include "optim/flat_params.h"

#include <algorithm>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/log.h"

namespace lmtrain::optim {
namespace {
constexpr int64_t kAlign = 16;  // elements: 64-byte aligned segment starts for SIMD
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

namespace {
torch::TensorOptions first_parameter_options(torch::nn::Module& module) {
  auto params = module.parameters();
  return params.empty() ? torch::TensorOptions() : params.front().options();
}
}  // namespace

// Reverse registration order: modules register in forward order, so this is roughly the order
// in which backward finishes each gradient. Frozen parameters (e.g. a LoRA base) stay ordinary
// tensors without gradient, so they get no optimizer state and no gradient sync.
void FlatParams::append_trainable(torch::nn::Module& module, const std::string& prefix,
                                  const std::function<model::ParamTag(const std::string&)>& tag_of,
                                  std::vector<Entry>& out) {
  std::vector<Entry> mine;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    auto tag = tag_of(item.key());
    if (tag.trainable) mine.push_back({prefix + item.key(), item.value(), tag});
  }
  out.insert(out.end(), mine.rbegin(), mine.rend());
}

FlatParams::FlatParams(torch::nn::Module& module, const model::ParamTags& tags,
                       int64_t pad_multiple, GradBuffer grads)
    : FlatParams(std::vector<ParamSource>{{"", &module, tags}}, pad_multiple, grads) {}

std::vector<FlatParams::Entry> FlatParams::entries_of(const std::vector<ParamSource>& sources) {
  std::vector<Entry> entries;
  for (auto it = sources.rbegin(); it != sources.rend(); ++it) {
    const auto& src = *it;
    append_trainable(
        *src.module, src.prefix,
        [&](const std::string& name) {
          auto tag = src.tags.find(name);
          if (tag == src.tags.end()) {
            throw Error("internal: parameter '" + src.prefix + name + "' has no tag");
          }
          return tag->second;
        },
        entries);
  }
  return entries;
}

FlatParams::FlatParams(const std::vector<ParamSource>& sources, int64_t pad_multiple,
                       GradBuffer grads) {
  build(entries_of(sources), pad_multiple,
        sources.empty() ? torch::TensorOptions() : first_parameter_options(*sources[0].module),
        grads);
}

FlatParams::FlatParams(const std::vector<ParamSource>& sources, int64_t pad_multiple,
                       const ShardOnly& shard) {
  build(entries_of(sources), pad_multiple, shard.options, GradBuffer::kNone, &shard);
}

FlatParams::FlatParams(torch::nn::Module& module,
                       const std::function<bool(const std::string&)>& decays,
                       int64_t pad_multiple) {
  std::vector<Entry> entries;
  append_trainable(
      module, "",
      [&](const std::string& name) {
        model::ParamTag tag;
        tag.decay = decays(name);
        return tag;
      },
      entries);
  build(std::move(entries), pad_multiple, first_parameter_options(module), GradBuffer::kWhole);
}

void FlatParams::build(std::vector<Entry> ordered, int64_t pad_multiple,
                       torch::TensorOptions fallback, GradBuffer grads, const ShardOnly* shard) {
  // Expert stacks last (stable: each part keeps the backward order).
  std::stable_partition(ordered.begin(), ordered.end(),
                        [](const Entry& e) { return !e.tag.expert; });
  const int64_t multiple = std::max<int64_t>(1, pad_multiple);
  auto pad = [multiple](int64_t n) { return (n + multiple - 1) / multiple * multiple; };
  int64_t offset = 0;
  bool in_experts = false;
  torch::TensorOptions opts = fallback;
  for (const auto& e : ordered) {
    ParamSegment seg;
    seg.name = e.name;
    seg.offset = offset;
    seg.numel = e.param.numel();
    seg.shape = e.param.sizes().vec();
    if (e.tag.expert && !in_experts) {
      in_experts = true;
      offset = pad(offset);  // the shared region splits evenly too
      seg.offset = offset;
      expert_begin_ = offset;
    }
    seg.decay = e.tag.decay;
    seg.block_matrix = e.tag.block_matrix;
    seg.expert = e.tag.expert;
    seg.lr_group = e.tag.lr_group;
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
    opts = e.param.options();
  }
  const int64_t total = pad(offset);
  if (!in_experts) expert_begin_ = total;
  if (shard) {
    // Nothing whole: the parameters stay as built (their values go into the shard).
    numel_ = total;
    options_ = shard->options.requires_grad(false);
    for (const auto& e : ordered) tensors_.push_back(e.param);
    const int64_t sharded = shard->keep_experts ? expert_begin_ : total;
    if (shard->ranks < 1 || sharded % shard->ranks != 0) {
      throw Error("internal: FlatParams: the layout does not split over the shard group");
    }
    const int64_t size = sharded / shard->ranks;
    make_shard_buffers(shard->rank * size, size, shard->keep_experts, /*from_whole=*/false);
    return;
  }
  // Uninitialised, then filled segment by segment while each parameter's own storage is let
  // go (set_data; nothing else holds it): where memory is committed on first write (host
  // memory), the model is held about once while it moves, not twice. The caching allocator
  // of a GPU has the whole buffer at once: there the move holds the model twice for a moment.
  params_ = torch::empty({total}, opts.requires_grad(false));
  if (grads == GradBuffer::kWhole) grads_ = torch::zeros({total}, opts.requires_grad(false));
  numel_ = total;
  options_ = params_.options();
  torch::NoGradGuard no_grad;
  int64_t filled = 0;  // the padding before each segment, and the tail, stay zero
  for (size_t i = 0; i < ordered.size(); ++i) {
    auto& p = ordered[i].param;
    const auto& seg = segments_[i];
    if (seg.offset > filled) params_.narrow(0, filled, seg.offset - filled).zero_();
    filled = seg.offset + seg.numel;
    auto pv = view(params_, seg);
    pv.copy_(p);
    p.set_data(pv);
    // A defined gradient makes autograd accumulate in place into our buffer.
    if (grads_.defined()) p.mutable_grad() = view(grads_, seg);
    tensors_.push_back(p);
  }
  if (total > filled) params_.narrow(0, filled, total - filled).zero_();
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

std::string layout_signature(const std::vector<ParamSegment>& segments, bool shared_only) {
  std::string desc;
  for (const auto& s : segments) {
    if (shared_only && s.expert) continue;
    desc += s.name + ":" + std::to_string(s.offset) + ":" + std::to_string(s.numel) + ";";
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", core::crc32c(desc));
  return buf;
}

void lay_out_segments(std::vector<ParamSegment>& segments) {
  int64_t offset = 0;
  for (auto& seg : segments) {
    seg.offset = offset;
    offset = align_up(offset + seg.numel);
  }
}

std::string FlatParams::layout_signature(bool shared_only) const {
  return optim::layout_signature(segments_, shared_only);
}

at::Tensor FlatParams::grad_norm() const {
  if (shard_only_ || !grads_.defined()) {
    throw Error("internal: FlatParams::grad_norm without a whole gradient buffer");
  }
  return grads_.norm().to(torch::kFloat64);
}

void FlatParams::keep_shard(int64_t begin, int64_t size, bool keep_experts) {
  const int64_t end = keep_experts ? expert_begin_ : numel_;
  if (shard_only_ || begin < 0 || size < 0 || begin + size > end) {
    throw Error("internal: FlatParams::keep_shard: bad shard or already sharded");
  }
  make_shard_buffers(begin, size, keep_experts, /*from_whole=*/true);
}

void FlatParams::make_shard_buffers(int64_t begin, int64_t size, bool keep_experts,
                                    bool from_whole) {
  torch::NoGradGuard no_grad;
  shard_params_ =
      from_whole ? params_.narrow(0, begin, size).clone() : torch::zeros({size}, options_);
  shard_grads_ = torch::zeros({size}, options_);
  if (keep_experts) {
    // The expert parameters move into the kept region, so nothing views the whole buffers.
    expert_params_ = from_whole ? expert_region(params_).clone()
                                : torch::zeros({numel_ - expert_begin_}, options_);
    expert_grads_ = torch::zeros({numel_ - expert_begin_}, options_);
    for (size_t i = 0; i < segments_.size(); ++i) {
      const auto& seg = segments_[i];
      if (!seg.expert) continue;
      const int64_t at = seg.offset - expert_begin_;
      tensors_[i].set_data(expert_params_.narrow(0, at, seg.numel).view(seg.shape));
      tensors_[i].mutable_grad() = expert_grads_.narrow(0, at, seg.numel).view(seg.shape);
    }
  }
  shard_begin_ = begin;
  shard_only_ = true;
  params_ = torch::Tensor();
  grads_ = torch::Tensor();
}

void FlatParams::zero_grad() {
  if (!shard_only_) {
    if (grads_.defined()) grads_.zero_();  // GradBuffer::kNone: nothing to zero yet
    return;
  }
  shard_grads_.zero_();
  if (expert_grads_.defined()) expert_grads_.zero_();
}

namespace {
torch::Tensor slice_of(const torch::Tensor& whole, const torch::Tensor& shard, bool shard_only,
                       int64_t shard_begin, int64_t begin, int64_t n, const torch::Tensor& experts,
                       int64_t expert_begin) {
  if (!shard_only) {
    if (!whole.defined()) {
      throw Error(
          "internal: FlatParams: no whole gradient buffer (GradBuffer::kNone) before "
          "keep_shard");
    }
    return whole.narrow(0, begin, n);
  }
  if (experts.defined() && begin >= expert_begin && begin + n <= expert_begin + experts.numel()) {
    return experts.narrow(0, begin - expert_begin, n);  // the kept expert region
  }
  if (begin < shard_begin || begin + n > shard_begin + shard.numel()) {
    throw Error(log::format("internal: elements [%lld, %lld) are not in this rank's shard",
                            (long long)begin, (long long)(begin + n)));
  }
  return shard.narrow(0, begin - shard_begin, n);
}
}  // namespace

torch::Tensor FlatParams::param_slice(int64_t begin, int64_t n) const {
  return slice_of(params_, shard_params_, shard_only_, shard_begin_, begin, n, expert_params_,
                  expert_begin_);
}

torch::Tensor FlatParams::grad_slice(int64_t begin, int64_t n) const {
  return slice_of(grads_, shard_grads_, shard_only_, shard_begin_, begin, n, expert_grads_,
                  expert_begin_);
}

}  // namespace lmtrain::optim
