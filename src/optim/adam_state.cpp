#include "optim/adam_state.h"

#include <map>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::optim {
namespace {

const at::Tensor& find_tensor(const NamedTensors& file, const std::string& name, size_t rank) {
  for (const auto& [n, t] : file) {
    if (n == name) return t;
  }
  throw Error(
      log::format("optimizer state (rank %zu file) has no tensor '%s'", rank, name.c_str()));
}

}  // namespace

std::pair<at::Tensor, at::Tensor> assemble_adam_state(const FlatParams& flat,
                                                      const std::vector<NamedTensors>& files,
                                                      const nlohmann::json& layout) {
  torch::NoGradGuard no_grad;
  auto m = torch::zeros_like(flat.params());
  auto v = torch::zeros_like(flat.params());
  const std::string kind = layout.is_object() ? layout.value("kind", "named") : "named";
  if (files.empty()) throw Error("optimizer state: no files");

  // Named state ("exp_avg.<param>") of every segment, or of the expert segments only.
  auto copy_named = [&](bool experts_only) {
    for (const char* k : {"exp_avg.", "exp_avg_sq."}) {
      auto& dst_flat = std::string(k) == "exp_avg." ? m : v;
      for (const auto& seg : flat.segments()) {
        if (experts_only && !seg.expert) continue;
        auto src = find_tensor(files[0], k + seg.name, 0);
        auto dst = flat.view(dst_flat, seg);
        if (seg.expert && src.dim() > 0 && dst.dim() > 0 && src.size(0) > dst.size(0) &&
            flat.expert_first() + dst.size(0) <= src.size(0)) {
          src = src.narrow(0, flat.expert_first(), dst.size(0));  // this rank's experts
        }
        if (src.sizes() != dst.sizes()) {
          throw Error("optimizer state tensor '" + std::string(k) + seg.name + "' has shape " +
                      c10::str(src.sizes()) + ", the model expects " + c10::str(dst.sizes()));
        }
        dst.copy_(src);
      }
    }
  };
  if (kind == "named") {
    copy_named(false);
    return {m, v};
  }
  if (kind != "flat_shards") throw Error("optimizer state: unknown layout kind '" + kind + "'");

  const auto world = layout.at("world_size").get<size_t>();
  const auto shard = layout.at("shard_numel").get<int64_t>();
  const auto signature = layout.at("flat_layout").get<std::string>();
  // Saved under expert parallelism: the shards cover the shared region, the experts are named.
  const bool named_experts = layout.value("experts", "") == "named";
  if (signature != flat.layout_signature(named_experts)) {
    throw Error("optimizer state was saved for a different parameter layout (" + signature +
                " vs " + flat.layout_signature(named_experts) + "): the model changed" +
                (flat.expert_begin() < flat.numel() && !named_experts
                     ? ", or the state was sharded by ZeRO at dist.ep=1 (its shards cover the "
                       "experts too, so it resumes only at dist.ep=1)"
                     : ""));
  }
  if (files.size() != world) {
    throw Error(
        log::format("optimizer state was sharded over %zu ranks but %zu rank files were "
                    "found",
                    world, files.size()));
  }
  // The saved flat buffers (or shared region) were padded to world*shard elements; ours may be
  // shorter or longer (padding only ever follows the last parameter of the region).
  const int64_t region = named_experts ? flat.expert_begin() : flat.numel();
  const int64_t keep = std::min<int64_t>(region, static_cast<int64_t>(world) * shard);
  for (size_t r = 0; r < world; ++r) {
    const int64_t begin = static_cast<int64_t>(r) * shard;
    if (begin >= keep) break;
    const int64_t n = std::min(shard, keep - begin);
    for (const char* k : {"exp_avg", "exp_avg_sq"}) {
      const auto& src = find_tensor(files[r], k, r);
      if (src.dim() != 1 || src.numel() != shard) {
        throw Error(
            log::format("optimizer shard '%s' of rank %zu has %lld elements, layout says "
                        "%lld",
                        k, r, (long long)src.numel(), (long long)shard));
      }
      (std::string(k) == "exp_avg" ? m : v).narrow(0, begin, n).copy_(src.narrow(0, 0, n));
    }
  }
  if (named_experts) copy_named(true);
  return {m, v};
}

}  // namespace lmtrain::optim
