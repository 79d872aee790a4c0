#include "train/plan_layouts.h"

#include "core/log.h"

namespace lmtrain::train {

std::vector<PlanLayout> candidate_layouts(const model::ModelOptions& model, int nproc,
                                          int64_t seq_len) {
  std::vector<PlanLayout> all;
  auto add = [&](int tp, int ep, int zero, int group) {
    PlanLayout l;
    l.nproc = nproc;
    l.tp = tp;
    l.ep = ep;
    l.zero = zero;
    l.shard_group_size = group;
    if (layout_problem(model, l, seq_len).empty()) all.push_back(l);
  };
  // HSDP rows: ZeRO-3 within every shard group size G that divides the data-parallel ranks
  // (nproc / tp), 2 <= G < them (G = all of them is plain ZeRO-3).
  auto add_hsdp = [&](int tp, int ep) {
    const int dp = nproc / tp;
    for (int g = 2; g < dp; ++g) {
      if (dp % g == 0) add(tp, ep, 3, g);
    }
  };
  for (int zero = 0; zero <= 3; ++zero) add(1, 1, zero, 0);
  add_hsdp(1, 1);
  for (int t = 2; t <= nproc; ++t) {
    if (nproc % t != 0) continue;
    for (int zero = 0; zero <= 3; ++zero) add(t, 1, zero, 0);
    add_hsdp(t, 1);
  }
  if (model.shape.moe.enabled()) {
    for (int e = 2; e <= nproc; ++e) {
      if (nproc % e != 0) continue;
      for (int zero = 0; zero <= 3; ++zero) add(1, e, zero, 0);
      add_hsdp(1, e);
    }
  }
  return all;
}

std::string layout_table(const ModelCensus& census, const model::ModelOptions& model,
                         const std::vector<PlanLayout>& layouts, const ActivationShape& act,
                         const TrafficInputs& traffic, int64_t device_bytes) {
  auto gib = [](int64_t bytes) { return log::format("%.2f", bytes / 1073741824.0); };
  std::string out = log::format(
      "layouts at %d ranks, micro-batch 1, device memory %s GiB (GiB per rank):\n"
      "| layout | parameters (trained + frozen) | gradients | optimizer | gathered | activations | "
      "peak | fits | "
      "largest micro-batch | sent per step |\n"
      "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
      layouts.empty() ? 0 : layouts.front().nproc, gib(device_bytes).c_str());
  for (const auto& l : layouts) {
    const MemoryPlan p = plan_memory(census, model, l, act, 1);
    TrafficInputs t = traffic;
    t.micro_batch = 1;
    const auto sent = plan_traffic(p, model, t);
    const int64_t largest = p.largest_micro_batch(device_bytes);
    out += "| " + l.describe() + " | " + gib(p.param_bytes + p.frozen_bytes) + " | " +
           gib(p.grad_bytes) + " | " + gib(p.optimizer_bytes) + " | " + gib(p.gathered_peak_bytes) +
           " | " + gib(p.activation_bytes) + " | " + gib(p.peak_bytes()) + " | " +
           (p.peak_bytes() <= device_bytes ? "yes" : "no") + " | " + std::to_string(largest) +
           " | " + gib(sent.total()) + " |\n";
  }
  return out;
}

}  // namespace lmtrain::train
