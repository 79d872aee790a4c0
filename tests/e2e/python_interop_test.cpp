// What lmtrain writes, read by the Python ecosystem's own libraries (project venv):
//   - every .safetensors of a run (model weights, AdamW / Muon / ZeRO-1 / ZeRO-2 optimizer
//     shards of 1 and 2 ranks, HF export, HF import) loads with the `safetensors` library with
//     the same names, dtypes, shapes and bytes;
//   - TensorBoard's EventAccumulator sees every scalar of a training run's event file, with
//     the steps and values of metrics.jsonl.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/safetensors.h"
#include "core/sha256.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class PythonInterop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_py_interop");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=512 --train.max_steps=6 --checkpoint.every=3";
  }
  static std::string launch(int ranks) {
    return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(ranks) +
           " --master_port=" + std::to_string(free_port()) + " -- train";
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* PythonInterop::dir_ = nullptr;
std::string PythonInterop::data_;

std::string torch_name(const std::string& dtype) {
  static const std::map<std::string, std::string> names = {
      {"F64", "float64"}, {"F32", "float32"}, {"F16", "float16"}, {"BF16", "bfloat16"},
      {"I64", "int64"},   {"I32", "int32"},   {"I16", "int16"},   {"I8", "int8"},
      {"U8", "uint8"},    {"BOOL", "bool"}};
  return names.at(dtype);
}

TEST_F(PythonInterop, SafetensorsLibraryReadsEveryFileLmtrainWrites) {
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"adamw", lmtrain_binary() + " train"},
      {"muon", lmtrain_binary() + " train --optim.name=muon"},
      {"zero1", launch(2) + " --dist.zero=1 --train.micro_batch_size=8"},
      {"zero2", launch(2) + " --dist.zero=2 --train.micro_batch_size=8"},
  };
  for (const auto& [name, command] : runs) {
    auto r = run_command(command + flags(dir_->file(name)));
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
  }
  auto e = run_command(lmtrain_binary() + " export hf " + dir_->file("adamw") + " " +
                       dir_->file("exported"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto i = run_command(lmtrain_binary() + " import hf " + dir_->file("exported") + " --output " +
                       dir_->file("imported"));
  ASSERT_EQ(i.exit_code, 0) << i.output;

  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir_->path())) {
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors" &&
        !fs::is_symlink(entry.path().parent_path())) {
      files.push_back(entry.path().string());
    }
  }
  std::string args;
  for (const auto& f : files) args += " " + f;
  auto r = run_hf_check("safetensors" + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto theirs = check_result(r);
  std::set<std::string> kinds;
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    kinds.insert(fs::path(f).filename().string());
    const auto header = core::read_safetensors_header(f);
    const auto ours = core::read_safetensors(f);  // no dtype conversion
    const auto& py = theirs.at(f);
    ASSERT_EQ(py["tensors"].size(), header.entries.size());
    for (const auto& [key, value] : header.metadata) EXPECT_EQ(py["metadata"][key], value);
    for (const auto& entry : header.entries) {
      SCOPED_TRACE(entry.name);
      ASSERT_TRUE(py["tensors"].contains(entry.name));
      const auto& t = py["tensors"][entry.name];
      EXPECT_EQ(t["dtype"], torch_name(entry.dtype));
      EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), entry.shape);
      const auto c = ours.tensors.at(entry.name).contiguous();
      EXPECT_EQ(t["sha256"], core::sha256_hex(c.data_ptr(), c.nbytes()));
    }
  }
  // Model weights and the optimizer files of 1 and 2 ranks were all among them.
  for (const char* kind :
       {"model.safetensors", "optim.rank0.safetensors", "optim.rank1.safetensors"}) {
    EXPECT_TRUE(kinds.count(kind)) << kind;
  }
  std::cout << files.size() << " .safetensors files read alike by lmtrain and `safetensors`\n";
}

TEST_F(PythonInterop, TensorBoardSeesEveryScalarOfATrainingRun) {
  const std::string run = dir_->file("tb");
  auto t = run_command(lmtrain_binary() + " train" + flags(run) + " --train.eval_every=2");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto r = run_hf_check("tensorboard " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto tb = check_result(r);
  // metrics.jsonl, as (tag -> [(step, value as the float32 the event stores)]).
  std::map<std::string, std::vector<std::pair<int64_t, float>>> want;
  std::istringstream lines(read_text(run + "/metrics.jsonl"));
  const std::vector<std::pair<std::string, std::string>> train_keys = {
      {"loss", "train/loss"},
      {"lr", "train/lr"},
      {"grad_norm", "train/grad_norm"},
      {"tokens_per_s", "train/tokens_per_s"},
      {"comm_wait_ms", "train/comm_wait_ms"}};
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    const int64_t step = j["step"];
    if (j.contains("val_loss")) {
      want["val/loss"].emplace_back(step, static_cast<float>(j["val_loss"].get<double>()));
      want["val/ppl"].emplace_back(step, static_cast<float>(j["val_ppl"].get<double>()));
      continue;
    }
    for (const auto& [key, tag] : train_keys) {
      if (j.contains(key)) want[tag].emplace_back(step, static_cast<float>(j[key].get<double>()));
    }
  }
  ASSERT_GE(want["train/loss"].size(), 6u);
  ASSERT_GE(want["val/loss"].size(), 3u);
  ASSERT_EQ(tb.size(), want.size()) << tb.dump();
  for (const auto& [tag, points] : want) {
    SCOPED_TRACE(tag);
    ASSERT_TRUE(tb.contains(tag));
    ASSERT_EQ(tb[tag].size(), points.size());
    for (size_t k = 0; k < points.size(); ++k) {
      EXPECT_EQ(tb[tag][k][0].get<int64_t>(), points[k].first);
      EXPECT_EQ(tb[tag][k][1].get<float>(), points[k].second);
    }
  }
}

}  // namespace
}  // namespace lmtrain::testing
