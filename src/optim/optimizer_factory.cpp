#include "optim/optimizer_factory.h"

#include "core/error.h"
#include "optim/zero_adamw.h"

namespace lmtrain::optim {

int64_t flat_pad_multiple(const OptimizerOptions& opts, int world_size) {
  return opts.zero > 0 ? 16 * static_cast<int64_t>(world_size) : 16;
}

GradBuffer flat_grad_buffer(const OptimizerOptions& opts, int world_size) {
  return opts.zero == 3 && world_size > 1 ? GradBuffer::kNone : GradBuffer::kWhole;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& opts, FlatParams& flat,
                                          dist::Group& group, dist::Group* expert_group) {
  const int zero = opts.zero;
  if (opts.name == OptimizerName::kAdamW) {
    if (zero == 0) return std::make_unique<AdamW>(flat, opts.adamw, expert_group);
    return std::make_unique<ZeroAdamW>(flat, opts.adamw, group, zero, expert_group);
  }
  // OptimizerName::kMuon
  if (expert_group) {
    throw UsageError(
        "dist.ep > 1 works with optim.name=adamw (replicated, or sharded with dist.zero=1/2/3); "
        "Muon's matrix ownership does not split expert stacks yet");
  }
  if (zero != 0) {
    throw UsageError(
        zero == 3 ? "dist.zero=3 needs optim.name=adamw: Muon orthogonalises whole matrices, which "
                    "ZeRO-3 keeps only as shards (DistMuon's matrix owners are not built on "
                    "ZeRO-3 yet); use optim.name=adamw, or dist.zero=0 with Muon"
                  : "dist.zero applies to optim.name=adamw; Muon shards by matrix ownership on "
                    "its own (DistMuon) whenever there is more than one rank: set dist.zero=0");
  }
  // nanochat's grouping: Muon for the transformer blocks' 2-D weight matrices (their tag).
  auto is_muon = [&flat](const std::string& n, const std::vector<int64_t>& shape) {
    return shape.size() == 2 && flat.segment(n).block_matrix;
  };
  return std::make_unique<Muon>(flat, opts.adamw, opts.muon, opts.lr, group, is_muon);
}

}  // namespace lmtrain::optim
