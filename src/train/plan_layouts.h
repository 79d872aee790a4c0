// `lmtrain plan --device_memory`: the layouts a model could train under at N ranks, each priced
// by the memory plan (train/memory_plan.h) and the traffic plan (train/traffic_plan.h), as a
// Markdown table: ZeRO-0/1/2/3, ZeRO-3 over HSDP shard groups (every G dividing N), tensor
// parallelism at every degree that splits the heads (with ZeRO 0-3), expert parallelism at every
// degree that splits the experts (with ZeRO 0-3), and HSDP under TP and under EP. Layouts the
// trainer refuses are left out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/memory_plan.h"
#include "train/traffic_plan.h"

namespace lmtrain::train {

std::vector<PlanLayout> candidate_layouts(const model::ModelOptions& model, int nproc,
                                          int64_t seq_len);

// One row per layout at micro-batch 1: bytes per rank by kind, the peak, whether it fits
// `device_bytes`, the largest micro-batch that does, and the bytes sent per step.
std::string layout_table(const ModelCensus& census, const model::ModelOptions& model,
                         const std::vector<PlanLayout>& layouts, const ActivationShape& act,
                         const TrafficInputs& traffic, int64_t device_bytes);

}  // namespace lmtrain::train
