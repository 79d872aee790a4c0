#include "optim/adam_state.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::optim {
namespace {

constexpr const char* kAdamMoments[2] = {"exp_avg", "exp_avg_sq"};

std::vector<int64_t> adam_saved_shape(const SavedTensors& saved, size_t file,
                                      const std::string& name) {
  auto shape = saved.shape(file, name);
  if (!shape) {
    throw Error(
        log::format("optimizer state (rank %zu file) has no tensor '%s'", file, name.c_str()));
  }
  return *shape;
}

// Where the saved tensor `name` of segment `seg` (of saved shape `src`) starts holding this
// rank's values, in its flattened elements: 0, or, for an expert stack saved whole while this
// rank holds experts [expert_first, + local) of it (expert parallelism), that first row.
// Throws when the shapes disagree.
int64_t adam_named_origin(const FlatParams& flat, const ParamSegment& seg, const std::string& name,
                          const std::vector<int64_t>& src) {
  std::vector<int64_t> got = src;
  int64_t origin = 0;
  const auto& want = seg.shape;
  if (seg.expert && !src.empty() && !want.empty() && src[0] > want[0] &&
      flat.expert_first() + want[0] <= src[0]) {
    int64_t inner = 1;
    for (size_t i = 1; i < src.size(); ++i) inner *= src[i];
    origin = flat.expert_first() * inner;
    got[0] = want[0];
  }
  if (got != want) {
    throw Error("optimizer state tensor '" + name + "' has shape " +
                c10::str(c10::IntArrayRef(got)) + ", the model expects " +
                c10::str(c10::IntArrayRef(want)));
  }
  return origin;
}

// The moments stored by name (file 0) of every segment, or of the expert segments only, at
// flat elements [begin, begin + m.numel()): each checked, only the overlaps read.
void read_named_adam_range(const FlatParams& flat, const SavedTensors& saved, bool experts_only,
                           int64_t begin, at::Tensor& m, at::Tensor& v) {
  const int64_t end = begin + m.numel();
  for (const auto& seg : flat.segments()) {
    if (experts_only && !seg.expert) continue;
    for (int k = 0; k < 2; ++k) {
      const std::string name = std::string(kAdamMoments[k]) + "." + seg.name;
      const int64_t origin = adam_named_origin(flat, seg, name, adam_saved_shape(saved, 0, name));
      const int64_t lo = std::max(begin, seg.offset), hi = std::min(end, seg.offset + seg.numel);
      if (lo >= hi) continue;
      const int64_t from = origin + lo - seg.offset;
      saved.read_into(0, name, from, (k == 0 ? m : v).narrow(0, lo - begin, hi - lo));
    }
  }
}

}  // namespace

void read_adam_range(const FlatParams& flat, const SavedTensors& saved,
                     const nlohmann::json& layout, int64_t begin, at::Tensor m, at::Tensor v) {
  torch::NoGradGuard no_grad;
  const std::string kind = layout.is_object() ? layout.value("kind", "named") : "named";
  if (saved.files() == 0) throw Error("optimizer state: no files");
  m.zero_();  // alignment padding, and what no saved shard covers, stays 0
  v.zero_();
  if (kind == "named") {
    read_named_adam_range(flat, saved, /*experts_only=*/false, begin, m, v);
    return;
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
  if (saved.files() != world) {
    throw Error(
        log::format("optimizer state was sharded over %zu ranks but %zu rank files were "
                    "found",
                    world, saved.files()));
  }
  for (size_t r = 0; r < world; ++r) {
    for (const char* k : kAdamMoments) {
      const auto shape = adam_saved_shape(saved, r, k);
      if (shape.size() != 1 || shape[0] != shard) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        throw Error(
            log::format("optimizer shard '%s' of rank %zu has %lld elements, layout says "
                        "%lld",
                        k, r, (long long)n, (long long)shard));
      }
    }
  }
  // Rank r's file holds elements [r S, (r+1) S) of the saved flat buffers (or shared region),
  // padded to world * S; ours may be shorter or longer (padding only ever follows the last
  // parameter of the region). Only the files overlapping [begin, end) are read.
  const int64_t region = named_experts ? flat.expert_begin() : flat.numel();
  const int64_t keep = std::min<int64_t>(region, static_cast<int64_t>(world) * shard);
  const int64_t end = std::min(begin + m.numel(), keep);
  for (int64_t r = shard > 0 ? begin / shard : 0; shard > 0 && r * shard < end; ++r) {
    const int64_t lo = std::max(begin, r * shard), hi = std::min(end, (r + 1) * shard);
    if (lo >= hi) continue;
    for (int k = 0; k < 2; ++k) {
      saved.read_into(static_cast<size_t>(r), kAdamMoments[k], lo - r * shard,
                      (k == 0 ? m : v).narrow(0, lo - begin, hi - lo));
    }
  }
  if (named_experts) read_named_adam_range(flat, saved, /*experts_only=*/true, begin, m, v);
}

}  // namespace lmtrain::optim
