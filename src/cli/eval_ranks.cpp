#include "cli/eval_ranks.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/log.h"
#include "distributed/env.h"
#include "distributed/process_group.h"

namespace lmtrain::cli {
namespace {

// Sum of a CPU tensor over the ranks, in place (exact for the integers and the zero-filled
// shares used here).
void eval_ranks_sum(at::Tensor& t, dist::Group& group) {
  if (group.size() > 1) group.allreduce(t, dist::ReduceOp::kSum)->wait();
}

// The largest of the ranks' widths, so that every rank's table has the same shape.
int64_t eval_ranks_widest(size_t local, dist::Group& group) {
  auto width = torch::tensor({static_cast<int64_t>(local)}, torch::kLong);
  if (group.size() > 1) group.allreduce(width, dist::ReduceOp::kMax)->wait();
  return width.item<int64_t>();
}

}  // namespace

EvalRanks eval_ranks() {
  EvalRanks r;
  const auto env = dist::discover_env();
  if (env.distributed()) {
    log::set_rank_prefix(env.rank, !env.launched_by_lmtrain);
    if (env.rank != 0) log::set_quiet(true);
    log::info(env.describe());
  }
  dist::GroupOptions options;
  options.backend = dist::BackendChoice::kGloo;
  r.group = dist::make_group(env, options);
  r.shard = {r.group->rank(), r.group->size()};
  return r;
}

void sum_over_ranks(eval::BpbResult& r, dist::Group& group) {
  // Doubles: nats, and the counts (exact below 2^53).
  auto t = torch::tensor({r.nats, static_cast<double>(r.tokens), static_cast<double>(r.bytes)},
                         torch::kFloat64);
  eval_ranks_sum(t, group);
  r.nats = t[0].item<double>();
  r.tokens = static_cast<int64_t>(t[1].item<double>());
  r.bytes = static_cast<int64_t>(t[2].item<double>());
  eval::finish_bpb(r);
}

void sum_over_ranks(eval::TaskScore& ts, dist::Group& group) {
  // Per item: correct, pred, the number of mean losses, then the losses (items x (3 + rows)).
  size_t rows = 0;
  for (const auto& s : ts.scores) rows = std::max(rows, s.mean_losses.size());
  const int64_t W = 3 + eval_ranks_widest(rows, group);
  auto t = torch::zeros({static_cast<int64_t>(ts.scores.size()), W}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  for (size_t i = 0; i < ts.scores.size(); ++i) {
    const auto& s = ts.scores[i];
    a[i][0] = s.correct, a[i][1] = static_cast<double>(s.pred);
    a[i][2] = static_cast<double>(s.mean_losses.size());
    for (size_t k = 0; k < s.mean_losses.size(); ++k) a[i][3 + k] = s.mean_losses[k];
  }
  eval_ranks_sum(t, group);
  for (size_t i = 0; i < ts.scores.size(); ++i) {
    auto& s = ts.scores[i];
    s.correct = a[i][0] != 0;
    s.pred = static_cast<int64_t>(a[i][1]);
    s.mean_losses.assign(static_cast<size_t>(a[i][2]), 0.0);
    for (size_t k = 0; k < s.mean_losses.size(); ++k) s.mean_losses[k] = a[i][3 + k];
  }
  eval::finish_task_score(ts);
}

void sum_over_ranks(eval::ChatTaskScore& ts, dist::Group& group) {
  // Per item: correct, the answer's length, then its bytes (items x (2 + longest)).
  size_t longest = 0;
  for (const auto& s : ts.scores) longest = std::max(longest, s.answer.size());
  const int64_t W = 2 + eval_ranks_widest(longest, group);
  auto t = torch::zeros({static_cast<int64_t>(ts.scores.size()), W}, torch::kLong);
  auto a = t.accessor<int64_t, 2>();
  for (size_t i = 0; i < ts.scores.size(); ++i) {
    const auto& s = ts.scores[i];
    a[i][0] = s.correct;
    a[i][1] = static_cast<int64_t>(s.answer.size());
    for (size_t k = 0; k < s.answer.size(); ++k) {
      a[i][2 + k] = static_cast<unsigned char>(s.answer[k]);
    }
  }
  eval_ranks_sum(t, group);
  for (size_t i = 0; i < ts.scores.size(); ++i) {
    auto& s = ts.scores[i];
    s.correct = a[i][0] != 0;
    s.answer.assign(static_cast<size_t>(a[i][1]), '\0');
    for (size_t k = 0; k < s.answer.size(); ++k) s.answer[k] = static_cast<char>(a[i][2 + k]);
  }
  eval::finish_chat_task_score(ts);
}

}  // namespace lmtrain::cli
