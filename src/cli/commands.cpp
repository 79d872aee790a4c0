#include "cli/commands.h"

#include <c10/util/Exception.h>

#include <iostream>

#include "core/error.h"
#include "core/log.h"
#include "core/malloc_tuning.h"
#include "core/torch_compat.h"

namespace lmtrain::cli {
namespace {

const char* kUsage = R"(lmtrain: train transformer language models in C++ on libtorch.

Usage: lmtrain <command> [flags]

Commands:
  prepare    text / JSONL files -> trained BPE tokenizer + binary token shards
  tokenize   encode a file to token ids with a tokenizer.json (or decode ids back)
  train      train a model from a YAML config (+ --section.key=value overrides)
  launch     start and supervise the ranks of a distributed job on this node (torchrun flags)
  generate   sample text from a checkpoint (KV cache, temperature / top-k / top-p)
  eval       loss and perplexity of a checkpoint on a token split; bits per byte, CORE and
             chat tasks
  chat       talk to a chat model in the terminal (streams; /clear, /temperature)
  serve      a chat model behind an OpenAI-compatible HTTP API and a chat page
  bench      tokens/s, step time, FLOPs and MFU of a config on this machine
  plan       bytes per rank (parameters, gradients, optimizer state, activations) of a config
             at --nproc N ranks, before any memory is spent
  distill-cache  a distillation teacher's top-k logits of every training window, to a file
  temporal-data  synthetic time-series question/answer samples (curves + text), sharded JSONL
  import     import hf DIR: a Hugging Face gpt2/llama/qwen2/qwen3/qwen3_moe/mixtral model ->
             lmtrain checkpoint
  export     export hf CHECKPOINT DIR: an lmtrain checkpoint -> Hugging Face model directory
             (gpt2/llama/qwen2/qwen3/qwen3_moe/mixtral);
             export peft --checkpoint PATH --output DIR: a LoRA run's adapters -> peft
  lora       lora merge --checkpoint PATH --output DIR: fold a LoRA run's adapters into its base
  report     report RUN_DIR [RUN_DIR ...]: one HTML page with charts of every metric, a summary
             and the config differences of one or more runs (--format md: a Markdown card)
  version    print the version and the libtorch it was built against

Run `lmtrain <command> --help` for a command's flags.
Exit codes: 0 success, 2 usage or config error, 1 any other failure, 128+N stopped by
signal N (train saves a checkpoint first: 130 after Ctrl-C, 143 after SIGTERM).
)";

}  // namespace

int run_main(int argc, char** argv) {
  Args all(argv + 1, argv + argc);
  if (all.empty() || all[0] == "-h" || all[0] == "--help" || all[0] == "help") {
    std::cout << kUsage;
    return all.empty() ? 2 : 0;
  }
  const std::string command = all[0];
  core::tune_malloc_for_training();
  Args args(all.begin() + 1, all.end());
  try {
    if (command == "prepare") return cmd_prepare(args);
    if (command == "tokenize") return cmd_tokenize(args);
    if (command == "train") return cmd_train(args);
    if (command == "generate") return cmd_generate(args);
    if (command == "eval") return cmd_eval(args);
    if (command == "bench") return cmd_bench(args);
    if (command == "plan") return cmd_plan(args);
    if (command == "distill-cache") return cmd_distill_cache(args);
    if (command == "launch") return cmd_launch(args);
    if (command == "import") return cmd_import(args);
    if (command == "export") return cmd_export(args);
    if (command == "lora") return cmd_lora(args);
    if (command == "temporal-data") return cmd_temporal_data(args);
    if (command == "report") return cmd_report(args);
    if (command == "chat") return cmd_chat(args);
    if (command == "serve") return cmd_serve(args);
    if (command == "version" || command == "--version") {
      std::cout << "lmtrain 0.1.0 (libtorch " << compat::torch_version_string() << ")\n";
      return 0;
    }
    std::cerr << "error: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const UsageError& e) {
    log::error(e.what());
    return 2;
  } catch (const Error& e) {
    log::error(e.what());
    return 1;
  } catch (const c10::Error& e) {
    log::error(std::string("(libtorch) ") + e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
}

}  // namespace lmtrain::cli
