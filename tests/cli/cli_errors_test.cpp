// The binary's exit codes and messages for bad command lines.
#include <gtest/gtest.h>

#include "test_util.h"

namespace lmtrain::cli {
namespace {

using lmtrain::testing::lmtrain_binary;
using lmtrain::testing::run_command;
using lmtrain::testing::source_dir;

struct Case {
  std::string args;
  int exit_code;
  std::string expected;
};

TEST(Cli, BadCommandLinesExitWithCodeTwoAndNameTheProblem) {
  const std::string cfg = source_dir() + "/configs/gpt2-tiny.yaml";
  const std::vector<Case> cases = {
      {"train --config " + cfg + " --model.n_layr=3", 2, "unknown config key 'model.n_layr'"},
      {"train --config " + cfg + " --optim.lr=-1", 2, "'optim.lr'"},
      {"train --config " + cfg + " --train.max_steps=abc", 2, "'train.max_steps'"},
      {"train --config /nonexistent.yaml", 2, "/nonexistent.yaml"},
      {"train --config " + cfg + " --bogus", 2, "unknown flag --bogus"},
      {"train --config " + cfg + " --data.dir=/nonexistent/data", 2, "data.dir"},
      {"train --config " + cfg + " --batch_size=0", 2, "'train.micro_batch_size'"},
      {"frobnicate", 2, "unknown command 'frobnicate'"},
      {"prepare --output /tmp/x", 2, "--input is required"},
      {"prepare --input /nonexistent/corpus.txt --output /tmp/lmtrain_cli_x", 2,
       "/nonexistent/corpus.txt"},
      {"generate --prompt hi", 2, "--checkpoint is required"},
      {"generate --checkpoint /nonexistent/run", 2, "/nonexistent/run"},
      {"eval --checkpoint /nonexistent/run", 2, "/nonexistent/run"},
      {"tokenize --input /dev/null", 2, "--tokenizer is required"},
      {"tokenize --train_vocab_size 300 --input /dev/null", 2, "needs --output"},
      {"tokenize --train_vocab_size 300 --input /dev/null --output /tmp/x --threads 2", 2,
       "--threads goes with --documents"},
      {"tokenize --train_vocab_size 100 --input /dev/null --output /tmp/x", 2,
       "--train_vocab_size"},
      {"tokenize --tokenizer /dev/null --input - --documents", 2, "stdin"},
  };
  for (const auto& c : cases) {
    auto r = run_command(lmtrain_binary() + " " + c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos)
        << c.args << "\noutput: " << r.output << "\nexpected: " << c.expected;
  }
}

TEST(Cli, NonFiniteOverflowingOrOutOfRangeFlagsAreUsageErrorsNamingTheFlag) {
  // The flags are checked before the (missing) checkpoint is opened: the message must name
  // the flag, not the checkpoint.
  const std::string gen = "generate --checkpoint /nonexistent/run ";
  const std::vector<Case> cases = {
      {gen + "--temperature=nan", 2, "--temperature expects a finite number, got 'nan'"},
      {gen + "--temperature=inf", 2, "--temperature expects a finite number, got 'inf'"},
      {gen + "--top_p=1e999", 2, "--top_p expects a finite number"},
      {gen + "--max_new_tokens=99999999999999999999", 2,
       "--max_new_tokens=99999999999999999999 is out of range"},
      {gen + "--max_new_tokens=-5", 2, "--max_new_tokens=-5 is out of range: must be in [0, "},
      {gen + "--threads=-1", 2, "--threads=-1 is out of range: must be in [0, 1024]"},
      {gen + "--threads=4294967297", 2, "--threads=4294967297 is out of range"},
      {"eval --checkpoint /nonexistent/run --threads=-1", 2, "--threads=-1 is out of range"},
      {"prepare --input /dev/null --output /tmp/lmtrain_cli_x --threads=-1", 2,
       "--threads=-1 is out of range"},
  };
  for (const auto& c : cases) {
    auto r = run_command(lmtrain_binary() + " " + c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos)
        << c.args << "\noutput: " << r.output << "\nexpected: " << c.expected;
  }
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* cmd : {"prepare", "tokenize", "train", "generate", "eval", "bench", "import",
                          "export", "lora", "report"}) {
    auto r = run_command(lmtrain_binary() + " " + cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.output.find("Usage: lmtrain " + std::string(cmd)), std::string::npos) << r.output;
  }
  auto r = run_command(lmtrain_binary() + " train --help-config");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("optim.lr"), std::string::npos);
}

}  // namespace
}  // namespace lmtrain::cli
