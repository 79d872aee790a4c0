// The scorings of `lmtrain eval` beside the loss (eval/): --bpb, --tasks, --chat_tasks.
#pragma once
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "cli/args.h"
#include "cli/eval_ranks.h"
#include "core/config.h"

namespace lmtrain::cli {

// Each scores its share of the items on `ranks` (eval_ranks.h); rank 0 prints and writes JSON.
// --bpb: bits per byte on the split (or --text FILE) of the checkpoint's data (eval/bpb.h).
int eval_bpb(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg,
             const std::string& split, EvalRanks& ranks);
// --tasks: CORE-style tasks of the DCLM bundle format (eval/core_tasks.h).
int eval_tasks(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg,
               EvalRanks& ranks);
// --chat_tasks: a chat model's multiple choice by letter and GSM8K (eval/chat_tasks.h).
int eval_chat_tasks(const ParsedArgs& args, train::InferenceModel& loaded, EvalRanks& ranks);

}  // namespace lmtrain::cli
