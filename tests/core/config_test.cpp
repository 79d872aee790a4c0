#include "core/config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::core {
namespace {

using lmtrain::testing::TempDir;
using lmtrain::testing::write_text;

// Runs `fn` and returns the UsageError message ("" if nothing was thrown).
template <typename Fn>
std::string usage_error(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string yaml_error(const std::string& yaml) {
  TempDir dir;
  write_text(dir.file("c.yaml"), yaml);
  return usage_error([&] { Config::defaults().merge_yaml_file(dir.file("c.yaml")); });
}

struct BadInput {
  std::string yaml;
  std::vector<std::string> expected;  // substrings of the message
};

TEST(Config, BadYamlInputsNameTheKeyAndTheProblem) {
  const std::vector<BadInput> cases = {
      {"model:\n  n_layr: 3\n",
       {"unknown config key 'model.n_layr'", "did you mean 'model.n_layer'"}},
      {"modle:\n  n_layer: 3\n", {"unknown config section 'modle'"}},
      // yaml-cpp's own "bad conversion" before (found by fuzz/yaml_config).
      {"model:\n  ? [n_layer, 2]\n  : 3\n", {"line 2: a key must be a plain name, not a list"}},
      {"? {train: 1}\n: x\n", {"line 1: a key must be a plain name, not a mapping"}},
      {"model:\n  n_layer: three\n", {"'model.n_layer'", "expected an integer"}},
      {"model:\n  n_layer: 2.5\n", {"'model.n_layer'", "expected an integer"}},
      {"model:\n  n_layer: 0\n", {"'model.n_layer'", "out of range, must be >= 1"}},
      {"model:\n  dropout: 1.5\n", {"'model.dropout'", "must be <= 0.99"}},
      {"optim:\n  lr: -0.1\n", {"'optim.lr'", "must be >= 0"}},
      {"optim:\n  lr: fast\n", {"'optim.lr'", "expected a number"}},
      {"optim:\n  schedule: exponential\n", {"'optim.schedule'", "must be one of", "cosine"}},
      {"model:\n  bias: maybe\n", {"'model.bias'", "expected a boolean"}},
      {"train:\n  max_steps: [1, 2]\n", {"'train.max_steps'", "got a list"}},
      {"train:\n  seed:\n    a: 1\n", {"'train.seed'", "got a mapping"}},
      {"train: 5\n", {"config section 'train'", "must be a mapping"}},
      {"- a\n- b\n", {"top level must be a mapping"}},
      {"model: {n_layer: 2\n", {"not valid YAML"}},
      {"optim:\n  beta2: 1.0\n", {"'optim.beta2'", "out of range"}},
      {"train:\n  precision: fp4\n", {"'train.precision'", "must be one of"}},
      {"data:\n  seq_len: 1e30\n", {"'data.seq_len'"}},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const auto& c : cases) {
    const std::string msg = yaml_error(c.yaml);
    ASSERT_FALSE(msg.empty()) << "no error for:\n" << c.yaml;
    for (const auto& part : c.expected) {
      EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nexpected: " << part;
    }
    EXPECT_NE(msg.find("c.yaml"), std::string::npos) << "message must name the file: " << msg;
  }
}

TEST(Config, DuplicateKeyIsAnErrorNamingTheKeyAndBothLines) {
  // Without the check the last value won silently (max_steps 20 here).
  EXPECT_NE(yaml_error("train:\n  max_steps: 10\n  seed: 3\n  max_steps: 20\n")
                .find("duplicate config key 'train.max_steps' in "),
            std::string::npos);
  const std::string msg = yaml_error("train:\n  max_steps: 10\n\n  max_steps: 20\n");
  EXPECT_NE(msg.find("(lines 2 and 4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("c.yaml"), std::string::npos) << msg;
  const std::string sections =
      yaml_error("train:\n  max_steps: 1\nmodel:\n  n_layer: 2\ntrain:\n  seed: 3\n");
  EXPECT_NE(sections.find("duplicate config key 'train' in "), std::string::npos) << sections;
  EXPECT_NE(sections.find("(lines 1 and 5)"), std::string::npos) << sections;
}

TEST(Config, MissingFileIsNamed) {
  auto msg = usage_error([] { Config::defaults().merge_yaml_file("/nonexistent/x.yaml"); });
  EXPECT_NE(msg.find("/nonexistent/x.yaml"), std::string::npos) << msg;
}

TEST(Config, OverridesAreValidatedAndNamed) {
  auto cfg = Config::defaults();
  auto msg = usage_error([&] { cfg.set("train.max_steps", "-5", "--train.max_steps"); });
  EXPECT_NE(msg.find("'train.max_steps'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--train.max_steps"), std::string::npos) << msg;
  msg = usage_error([&] { cfg.set("train.nope", "1", "--train.nope"); });
  EXPECT_NE(msg.find("unknown config key 'train.nope'"), std::string::npos) << msg;
}

TEST(Config, LayersDefaultsFileOverridesAndRoundTripsThroughYaml) {
  TempDir dir;
  write_text(dir.file("c.yaml"), "model:\n  n_layer: 3\n  bias: false\noptim:\n  lr: 1e-3\n");
  auto cfg = Config::defaults();
  EXPECT_EQ(cfg.get_int("model.n_layer"), 4);
  cfg.merge_yaml_file(dir.file("c.yaml"));
  EXPECT_EQ(cfg.get_int("model.n_layer"), 3);
  EXPECT_FALSE(cfg.get_bool("model.bias"));
  EXPECT_DOUBLE_EQ(cfg.get_float("optim.lr"), 1e-3);
  cfg.set("model.n_layer", "5", "--model.n_layer");
  cfg.set("run.dir", "some dir: with colon", "--run.dir");
  EXPECT_EQ(cfg.get_int("model.n_layer"), 5);

  auto back = Config::defaults();
  back.merge_yaml_text(cfg.to_yaml(), "round trip");
  EXPECT_EQ(back.to_yaml(), cfg.to_yaml());
  EXPECT_EQ(back.get_string("run.dir"), "some dir: with colon");
  EXPECT_EQ(back.section("model"), cfg.section("model"));
}

TEST(Config, AliasesMapToKeys) {
  EXPECT_STREQ(alias_target("lr"), "optim.lr");
  EXPECT_STREQ(alias_target("epochs"), "train.epochs");
  EXPECT_STREQ(alias_target("save_every"), "checkpoint.every");
  EXPECT_STREQ(alias_target("batch_size"), "train.micro_batch_size");
  EXPECT_STREQ(alias_target("resume"), "checkpoint.resume");
  EXPECT_STREQ(alias_target("output_dir"), "run.dir");
  EXPECT_EQ(alias_target("nonsense"), nullptr);
  for (const auto& [alias, target] : config_aliases()) {
    EXPECT_NE(find_key(target), nullptr) << alias << " -> " << target;
  }
}

TEST(Config, ReferenceListsEveryKey) {
  const std::string ref = config_reference();
  for (const auto& spec : config_schema()) {
    EXPECT_NE(ref.find(spec.path), std::string::npos) << spec.path;
  }
}

}  // namespace
}  // namespace lmtrain::core

namespace lmtrain::core {
namespace {

TEST(Config, ReadmeDocumentsEveryKey) {
  const std::string readme =
      lmtrain::testing::read_text(lmtrain::testing::source_dir() + "/README.md");
  for (const auto& spec : config_schema()) {
    EXPECT_NE(readme.find("`" + spec.path + "`"), std::string::npos)
        << spec.path << " is missing from README.md (run scripts/gen_config_table.py)";
  }
}

}  // namespace
}  // namespace lmtrain::core
