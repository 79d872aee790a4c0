// The report's tables, built once and drawn by both the HTML page and the Markdown card:
//  - the summary: one row per fact, one column per run (model, parameters, world size,
//    precision, device, steps, tokens seen, training time, best validation loss and its step,
//    final perplexity, mean tokens/s, checkpoints, state);
//  - the config diff: the config keys whose values differ between the runs (a key one run lacks
//    counts as differing), one column per run. run.dir is left out: it differs by definition
//    and names the columns.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace lmtrain::report {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table summary_table(const std::vector<RunData>& runs);

// The differing keys, sorted.
std::vector<std::string> config_diff_keys(const std::vector<RunData>& runs);
Table config_diff_table(const std::vector<RunData>& runs);

// The figures behind the summary, for tests and the page's header.
struct RunFigures {
  int64_t last_step = -1;    // last logged train step (-1: none)
  double best_val_loss = 0;  // valid when best_val_step >= 0
  int64_t best_val_step = -1;
  double final_val_ppl = 0;  // valid when has_val
  bool has_val = false;
  double mean_tokens_per_s = 0;  // 0: none logged
};
RunFigures run_figures(const RunData& run);

}  // namespace lmtrain::report
