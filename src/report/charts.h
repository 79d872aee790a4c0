// Which charts a report has: one per metric that any of its runs logged, found by name in
// metrics.jsonl (report/run_metrics.h), so a metric added later gets a chart without a change
// here; a run that lacks a metric is simply not in that chart, and a metric no run logged has
// none. Names only pick the section, title and line style:
//   Loss               train loss (raw, faint, and smoothed) with the validation loss (dashed,
//                      markers), against steps and against tokens (step x tokens per step);
//   Evaluation         val_ppl, accuracies (names ending in _acc or starting with qa/), other
//                      val_* and eval/* metrics: dashed with markers;
//   Objective terms    the other *_loss terms (kd, ce, feature, expert);
//   Optimisation       lr, grad_norm, loss_scale, skipped_steps;
//   Speed and memory   tokens_per_s, mfu, peak_mem_mib, comm_wait_ms, a2a_ms;
//   Mixture of experts per-layer statistics as heat maps (layers x steps), one per run;
//   Other metrics      anything else.
// epoch and elapsed_s are axes of a sort, not metrics: no chart. Every series is downsampled
// for drawing (report/downsample.h), several runs overlay in one chart in their own colours.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace lmtrain::report {

struct ChartSection {
  std::string title;
  std::vector<std::string> svgs;  // rendered charts, in order
};

std::vector<ChartSection> build_chart_sections(const std::vector<RunData>& runs);

// The section a metric's chart goes into (one of the titles above).
std::string metric_section(const std::string& name);

}  // namespace lmtrain::report
