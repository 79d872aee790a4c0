// Subcommands of the lmtrain binary. Each takes the arguments after its name and returns the
// process exit code; errors are thrown and mapped to exit codes by run_main.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::cli {

using Args = std::vector<std::string>;

int cmd_prepare(const Args& args);
int cmd_tokenize(const Args& args);
int cmd_train(const Args& args);
int cmd_generate(const Args& args);
int cmd_eval(const Args& args);
int cmd_bench(const Args& args);
int cmd_plan(const Args& args);
int cmd_distill_cache(const Args& args);
int cmd_launch(const Args& args);
int cmd_import(const Args& args);
int cmd_export(const Args& args);
int cmd_lora(const Args& args);
int cmd_temporal_data(const Args& args);
int cmd_report(const Args& args);
int cmd_chat(const Args& args);
int cmd_serve(const Args& args);

// Dispatch on argv[1]; UsageError -> 2, other errors -> 1.
int run_main(int argc, char** argv);

}  // namespace lmtrain::cli
