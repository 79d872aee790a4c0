#include "checkpoint/checkpoint_store.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {
namespace fs = std::filesystem;

// A checkpoint whose weights are filled with `fill`, so tests can tell checkpoints apart.
CheckpointFiles make_files(float fill) {
  CheckpointFiles files;
  files.tensor_files.push_back(
      {"model.safetensors",
       {{"transformer.wte.weight", torch::full({8, 4}, fill)},
        {"transformer.h.0.attn.c_attn.bias", torch::arange(12, torch::kFloat32) + fill}}});
  files.tensor_files.push_back(
      {"optim.rank0.safetensors",
       {{"state.0.exp_avg", torch::full({8, 4}, fill / 2).to(torch::kBFloat16)},
        {"state.0.step", torch::tensor({int64_t(fill * 10)})}}});
  return files;
}

std::string link_name(const std::string& link) {
  return fs::is_symlink(link) ? fs::read_symlink(link).string() : "<none>";
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void flip_byte(const std::string& path, size_t from_end) {
  std::string bytes = core::read_file(path);
  bytes[bytes.size() - from_end] ^= 0x10;
  testing::write_text(path, bytes);
}

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an lmtrain::Error";
  return "";
}

TEST(CheckpointStoreTest, SaveLoadRoundTrip) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 3);
  CheckpointFiles files = make_files(1.5f);
  files.raw_files.push_back({"tokenizer.json", R"({"vocab": {}})"});
  nlohmann::json meta = {{"epoch", 2}, {"world_size", 1}, {"config", {{"model", "gpt2-tiny"}}}};
  const std::string dir = store.save(1000, files, meta, 3.25);
  EXPECT_EQ(dir, run.path() + "/checkpoints/step_00001000");

  CheckpointStore::verify(dir);
  LoadedCheckpoint loaded = CheckpointStore::load(dir, /*allow_fallback=*/false);
  EXPECT_EQ(loaded.dir, dir);
  EXPECT_EQ(loaded.step, 1000);
  EXPECT_FALSE(loaded.fell_back);
  EXPECT_EQ(loaded.meta["epoch"], 2);
  EXPECT_EQ(loaded.meta["config"]["model"], "gpt2-tiny");
  EXPECT_EQ(loaded.meta["step"], 1000);
  EXPECT_EQ(loaded.meta["format_version"], CheckpointStore::kFormatVersion);
  EXPECT_EQ(loaded.meta["val_loss"], 3.25);
  for (const char* f : {"model.safetensors", "optim.rank0.safetensors", "tokenizer.json"}) {
    ASSERT_TRUE(loaded.meta["files"].contains(f)) << f;
    EXPECT_EQ(loaded.meta["files"][f]["bytes"], fs::file_size(dir + "/" + f));
    EXPECT_EQ(loaded.meta["files"][f]["sha256"].get<std::string>().size(), 64u);
  }
  ASSERT_EQ(loaded.files.size(), 2u);  // only .safetensors files are loaded as tensors
  for (const auto& [file, tensors] : files.tensor_files) {
    const core::SafetensorsFile& got = loaded.files.at(file);
    ASSERT_EQ(got.names.size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(got.names[i], tensors[i].first);
      EXPECT_TRUE(torch::equal(got.tensors.at(tensors[i].first), tensors[i].second))
          << file << ":" << tensors[i].first;
    }
    EXPECT_EQ(got.metadata.at("format"), "pt");  // what transformers requires
  }
  EXPECT_EQ(core::read_file(dir + "/tokenizer.json"), R"({"vocab": {}})");

  // A subset (one rank's optimizer shard).
  auto subset = CheckpointStore::load(dir, false, {"optim.rank0.safetensors"});
  EXPECT_EQ(subset.files.size(), 1u);
  EXPECT_NE(error_of([&] {
              CheckpointStore::load(dir, false, {"optim.rank7.safetensors"});
            }).find("optim.rank7.safetensors"),
            std::string::npos);
}

TEST(CheckpointStoreTest, LatestAndBestFollowSaves) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  const std::string ck = run.path() + "/checkpoints";
  struct Save {
    int64_t step;
    std::optional<double> val;
    const char* latest;
    const char* best;
  };
  const Save saves[] = {
      {100, std::nullopt, "step_00000100", "<none>"},
      {200, 3.0, "step_00000200", "step_00000200"},
      {300, 2.0, "step_00000300", "step_00000300"},
      {400, std::nullopt, "step_00000400", "step_00000300"},
      {500, 2.5, "step_00000500", "step_00000300"},
      {600, 2.0, "step_00000600", "step_00000300"},  // a tie keeps the earlier best
      {700, 1.0, "step_00000700", "step_00000700"},
  };
  for (const auto& s : saves) {
    store.save(s.step, make_files(float(s.step)), {}, s.val);
    EXPECT_EQ(link_name(ck + "/latest"), s.latest) << "after step " << s.step;
    EXPECT_EQ(link_name(ck + "/best"), s.best) << "after step " << s.step;
  }
  EXPECT_EQ(CheckpointStore::list(ck).size(), 7u);
  auto best = CheckpointStore::resolve("best", run.path());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(*best, ck + "/step_00000700");
}

TEST(CheckpointStoreTest, KeepLastPrunesOldestButKeepsBest) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 2);
  store.save(1, make_files(1), {}, 0.5);  // best forever
  for (int64_t step = 2; step <= 5; ++step) store.save(step, make_files(float(step)), {}, 1.0);
  const std::string ck = run.path() + "/checkpoints";
  EXPECT_EQ(dir_names(ck), (std::vector<std::string>{"best", "latest", "step_00000001",
                                                     "step_00000004", "step_00000005"}));
  EXPECT_EQ(link_name(ck + "/best"), "step_00000001");
  EXPECT_EQ(link_name(ck + "/latest"), "step_00000005");
}

TEST(CheckpointStoreTest, FlippedByteFailsVerifyNamingFile) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  const std::string dir = store.save(10, make_files(2), {}, std::nullopt);
  flip_byte(dir + "/model.safetensors", 5);  // inside the tensor data
  const std::string msg = error_of([&] { CheckpointStore::verify(dir); });
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sha256"), std::string::npos) << msg;
  EXPECT_THROW(CheckpointStore::load(dir, /*allow_fallback=*/false), Error);
}

TEST(CheckpointStoreTest, TruncatedFileFailsVerify) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  const std::string dir = store.save(10, make_files(2), {}, std::nullopt);
  const std::string path = dir + "/optim.rank0.safetensors";
  fs::resize_file(path, fs::file_size(path) - 7);
  const std::string msg = error_of([&] { CheckpointStore::verify(dir); });
  EXPECT_NE(msg.find("optim.rank0.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  fs::remove(path);
  EXPECT_NE(error_of([&] { CheckpointStore::verify(dir); }).find("missing"), std::string::npos);
}

TEST(CheckpointStoreTest, LoadFallsBackToPreviousValidStep) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  store.save(1, make_files(1), {}, std::nullopt);
  store.save(2, make_files(2), {}, std::nullopt);
  const std::string third = store.save(3, make_files(3), {}, std::nullopt);
  flip_byte(third + "/model.safetensors", 3);
  const std::string latest = run.path() + "/checkpoints/latest";

  EXPECT_THROW(CheckpointStore::load(latest, /*allow_fallback=*/false), Error);
  ::testing::internal::CaptureStderr();
  LoadedCheckpoint loaded = CheckpointStore::load(latest, /*allow_fallback=*/true);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(loaded.step, 2);
  EXPECT_TRUE(loaded.fell_back);
  EXPECT_EQ(loaded.dir, run.path() + "/checkpoints/step_00000002");
  EXPECT_TRUE(
      torch::equal(loaded.files.at("model.safetensors").tensors.at("transformer.wte.weight"),
                   torch::full({8, 4}, 2.0f)));
  EXPECT_NE(log.find("warning"), std::string::npos) << log;
  EXPECT_NE(log.find("model.safetensors"), std::string::npos) << log;
  EXPECT_NE(log.find("step_00000002"), std::string::npos) << log;

  // Nothing older is valid either: a clear error, not a silent fresh start.
  flip_byte(run.path() + "/checkpoints/step_00000002/meta.json", 2);
  fs::remove_all(run.path() + "/checkpoints/step_00000001");
  ::testing::internal::CaptureStderr();
  const std::string msg = error_of([&] { CheckpointStore::load(latest, true); });
  ::testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("no valid older checkpoint"), std::string::npos) << msg;
}

TEST(CheckpointStoreTest, RequestsAreParsedOnce) {
  using Kind = CheckpointRequest::Kind;
  EXPECT_EQ(CheckpointRequest::parse("").kind, Kind::kNone);
  EXPECT_EQ(CheckpointRequest::parse("none").kind, Kind::kNone);
  EXPECT_EQ(CheckpointRequest::parse("auto").kind, Kind::kAuto);
  EXPECT_EQ(CheckpointRequest::parse("latest").kind, Kind::kLatest);
  EXPECT_EQ(CheckpointRequest::parse("best").kind, Kind::kBest);
  const auto path = CheckpointRequest::parse("runs/a/checkpoints/best");
  EXPECT_EQ(path.kind, Kind::kPath);
  EXPECT_EQ(path.text, "runs/a/checkpoints/best");
  EXPECT_EQ(CheckpointRequest::parse("Auto").kind, Kind::kPath);  // keywords are lower case
  EXPECT_FALSE(CheckpointRequest::parse("none").any());
  EXPECT_TRUE(CheckpointRequest::parse("auto").any());
}

TEST(CheckpointStoreTest, ResolveSpecs) {
  testing::TempDir run;
  const std::string ck = run.path() + "/checkpoints";
  EXPECT_FALSE(CheckpointStore::resolve("auto", run.path()).has_value());
  EXPECT_FALSE(CheckpointStore::resolve("latest", run.path()).has_value());
  EXPECT_FALSE(CheckpointStore::resolve("best", run.path()).has_value());
  EXPECT_FALSE(CheckpointStore::resolve("none", run.path()).has_value());
  EXPECT_THROW(CheckpointStore::resolve(run.file("nope"), run.path()), UsageError);
  EXPECT_THROW(CheckpointStore::resolve(run.path(), run.path()), UsageError);  // no checkpoints

  CheckpointStore store(run.path(), 0);
  store.save(7, make_files(7), {}, 1.0);
  store.save(8, make_files(8), {}, 2.0);
  const std::string s7 = ck + "/step_00000007", s8 = ck + "/step_00000008";
  EXPECT_EQ(CheckpointStore::resolve("auto", run.path()), s8);
  EXPECT_EQ(CheckpointStore::resolve("latest", run.path()), s8);
  EXPECT_EQ(CheckpointStore::resolve("best", run.path()), s7);
  EXPECT_EQ(CheckpointStore::resolve(s7 + "/", "/elsewhere"), s7);
  EXPECT_EQ(CheckpointStore::resolve(ck + "/latest", "/elsewhere"), s8);
  EXPECT_EQ(CheckpointStore::resolve(ck + "/best", "/elsewhere"), s7);
  EXPECT_EQ(CheckpointStore::resolve(run.path(), "/elsewhere"), s8);
  EXPECT_EQ(CheckpointStore::resolve(ck, "/elsewhere"), s8);

  // Without a `latest` link (crash right after the rename) auto still finds the newest.
  fs::remove(ck + "/latest");
  EXPECT_EQ(CheckpointStore::resolve("auto", run.path()), s8);
}

TEST(CheckpointStoreTest, IncompleteCheckpointIgnoredByListing) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  store.save(1, make_files(1), {}, std::nullopt);
  const std::string two = store.save(2, make_files(2), {}, std::nullopt);
  fs::remove(two + "/meta.json");
  const std::string ck = run.path() + "/checkpoints";
  auto entries = CheckpointStore::list(ck);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].step, 1);
  EXPECT_NE(error_of([&] { CheckpointStore::verify(two); }).find("meta.json is missing"),
            std::string::npos);
  fs::remove(ck + "/latest");
  EXPECT_EQ(CheckpointStore::resolve("auto", run.path()), ck + "/step_00000001");
  // Loading the incomplete dir with fallback lands on step 1.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CheckpointStore::load(two, true).step, 1);
  ::testing::internal::GetCapturedStderr();
}

TEST(CheckpointStoreTest, CrashDebrisIgnoredThenCleaned) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  store.save(1, make_files(1), {}, std::nullopt);
  const std::string ck = run.path() + "/checkpoints";
  // What a crash mid-save leaves behind.
  core::ensure_dir(ck + "/.tmp_step_00000002");
  testing::write_text(ck + "/.tmp_step_00000002/model.safetensors", "partial");
  ASSERT_EQ(::symlink("step_00000002", (ck + "/latest.tmp.12345").c_str()), 0);
  EXPECT_EQ(CheckpointStore::list(ck).size(), 1u);
  EXPECT_EQ(CheckpointStore::resolve("auto", run.path()), ck + "/step_00000001");

  ::testing::internal::CaptureStderr();
  store.save(3, make_files(3), {}, std::nullopt);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(dir_names(ck), (std::vector<std::string>{"latest", "step_00000001", "step_00000003"}));
}

TEST(CheckpointStoreTest, CrashDuringResaveRestoresParkedCheckpoint) {
  // Where the filesystem cannot swap directories atomically, a re-save parks the old dir as
  // .replaced_step_X for a moment; after a crash there, the next save must put it back.
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  const std::string dir = store.save(4, make_files(4), {{"tag", "original"}}, std::nullopt);
  const std::string ck = run.path() + "/checkpoints";
  fs::rename(dir, ck + "/.replaced_step_00000004");
  ::testing::internal::CaptureStderr();
  store.save(5, make_files(5), {}, std::nullopt);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(dir_names(ck), (std::vector<std::string>{"latest", "step_00000004", "step_00000005"}));
  EXPECT_EQ(CheckpointStore::load(dir, false).meta["tag"], "original");
}

TEST(CheckpointStoreTest, FailedSaveKeepsPreviousCheckpoints) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 1);
  store.save(1, make_files(1), {{"note", "first"}}, 1.0);
  const std::string ck = run.path() + "/checkpoints";
  CheckpointFiles bad = make_files(2);
  bad.tensor_files[1].second.push_back({"broken", at::Tensor()});  // fails mid-save
  EXPECT_THROW(store.save(2, bad, {}, 0.1), Error);
  CheckpointFiles clash = make_files(2);
  clash.raw_files.push_back({"meta.json", "{}"});
  EXPECT_THROW(store.save(2, clash, {}, 0.1), Error);
  EXPECT_THROW(store.save(2, make_files(2), nlohmann::json::array(), 0.1), Error);

  EXPECT_EQ(dir_names(ck), (std::vector<std::string>{"best", "latest", "step_00000001"}));
  EXPECT_EQ(link_name(ck + "/latest"), "step_00000001");
  EXPECT_EQ(CheckpointStore::load(ck + "/latest", false).meta["note"], "first");
}

TEST(CheckpointStoreTest, ResavingAStepReplacesIt) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 0);
  store.save(5, make_files(1), {{"version", 1}}, 2.0);
  const std::string dir = store.save(5, make_files(9), {{"version", 2}}, 3.0);
  LoadedCheckpoint loaded = CheckpointStore::load(run.path() + "/checkpoints/latest", false);
  EXPECT_EQ(loaded.dir, dir);
  EXPECT_EQ(loaded.meta["version"], 2);
  EXPECT_TRUE(
      torch::equal(loaded.files.at("model.safetensors").tensors.at("transformer.wte.weight"),
                   torch::full({8, 4}, 9.0f)));
  EXPECT_EQ(dir_names(run.path() + "/checkpoints"),
            (std::vector<std::string>{"best", "latest", "step_00000005"}));
}

TEST(CheckpointStoreTest, EpochLinksNameTheirStepAndSurvivePruning) {
  testing::TempDir run;
  CheckpointStore store(run.path(), 1);
  const std::string ck = run.path() + "/checkpoints";
  store.save(5, make_files(5), {}, 2.0, /*ended_epoch=*/1);
  store.save(7, make_files(7), {}, std::nullopt);
  store.save(10, make_files(10), {}, 1.0, /*ended_epoch=*/2);
  store.save(12, make_files(12), {}, std::nullopt);
  // keep_last=1 leaves the latest (12) and the epoch links' targets (5, 10; 10 is also best).
  EXPECT_EQ(dir_names(ck), (std::vector<std::string>{
                               "best", "epoch_1_step_00000005", "epoch_2_step_00000010", "latest",
                               "step_00000005", "step_00000010", "step_00000012"}));
  EXPECT_EQ(link_name(ck + "/epoch_1_step_00000005"), "step_00000005");  // relative
  EXPECT_EQ(link_name(ck + "/epoch_2_step_00000010"), "step_00000010");
  EXPECT_EQ(link_name(ck + "/best"), "step_00000010");
  // Resolved like a step dir: as a path, or by its bare name within the run dir.
  EXPECT_EQ(CheckpointStore::resolve(ck + "/epoch_1_step_00000005", "/elsewhere"),
            ck + "/step_00000005");
  EXPECT_EQ(CheckpointStore::resolve("epoch_1_step_00000005", run.path()), ck + "/step_00000005");
  EXPECT_EQ(CheckpointStore::resolve("step_00000012", run.path()), ck + "/step_00000012");
  EXPECT_THROW(CheckpointStore::resolve("epoch_3_step_00000015", run.path()), UsageError);
  EXPECT_EQ(CheckpointStore::load(ck + "/epoch_2_step_00000010", false).step, 10);
  EXPECT_THROW(store.save(13, make_files(13), {}, std::nullopt, 0), Error);
}

TEST(CheckpointStoreTest, StepDirNames) {
  EXPECT_EQ(CheckpointStore::step_dir_name(0), "step_00000000");
  EXPECT_EQ(CheckpointStore::step_dir_name(1000), "step_00001000");
  EXPECT_EQ(CheckpointStore::step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(CheckpointStore::epoch_link_name(3, 375), "epoch_3_step_00000375");
}

}  // namespace
}  // namespace lmtrain::train
