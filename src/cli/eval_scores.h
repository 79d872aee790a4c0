// The scorings of `lmtrain eval` beside the loss (eval/): --bpb, --tasks, --chat_tasks.
#pragma once
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "cli/args.h"
#include "core/config.h"

namespace lmtrain::cli {

// --bpb: bits per byte on the split (or --text FILE) of the checkpoint's data (eval/bpb.h).
int eval_bpb(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg,
             const std::string& split);
// --tasks: CORE-style tasks of the DCLM bundle format (eval/core_tasks.h).
int eval_tasks(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg);
// --chat_tasks: a chat model's multiple choice by letter and GSM8K (eval/chat_tasks.h).
int eval_chat_tasks(const ParsedArgs& args, train::InferenceModel& loaded);

}  // namespace lmtrain::cli
