#include "train/model_census.h"

#include <algorithm>

#include "core/error.h"
#include "core/runtime.h"
#include "parallel/shard_units.h"
#include "parallel/tensor_parallel_plan.h"

namespace lmtrain::train {

int64_t ModelCensus::trained_parameters() const {
  int64_t n = 0;
  for (const auto& e : entries) n += e.numel;
  return n;
}

ModelCensus take_census(const model::ModelOptions& model) {
  // Unwritten weights on the host: address space only (the pages are never touched).
  auto built = model::build_model(model, core::Runtime::cpu(), {/*init=*/false, {}});
  const auto tags = built->param_tags();
  ModelCensus c;
  c.n_layer = model.shape.n_layer;
  c.num_experts = model.shape.moe.num_experts;
  // FlatParams' order: reverse registration order, the expert stacks moved last (stable).
  for (const auto& item : built->named_parameters(/*recurse=*/true)) {
    const auto tag = tags.find(item.key());
    if (tag == tags.end()) throw Error("internal: parameter '" + item.key() + "' has no tag");
    CensusEntry e;
    e.name = item.key();
    e.numel = item.value().numel();
    e.aligned = (e.numel + 15) / 16 * 16;
    // Split under TP as parallel/tensor_parallel_plan.h slices it (degree 1 names the dim).
    e.tp_split =
        parallel::tensor_parallel_slice(model.shape, e.name, item.value().sizes().vec(), 0, 1)
            .sharded();
    e.expert = tag->second.expert;
    e.block_matrix = tag->second.block_matrix;
    e.unit = parallel::unit_of_name(e.name, c.n_layer);
    (tag->second.trainable ? c.entries : c.frozen).push_back(std::move(e));
  }
  std::reverse(c.entries.begin(), c.entries.end());
  std::stable_partition(c.entries.begin(), c.entries.end(),
                        [](const CensusEntry& e) { return !e.expert; });
  return c;
}

}  // namespace lmtrain::train
