// `lmtrain temporal-data` end to end (issue 26): the files and manifest it writes, the same
// bytes from two runs with different thread counts, the refusal of an occupied output without
// --overwrite, its flag errors and --help.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

CommandResult temporal_data(const std::string& flags) {
  return run_command(lmtrain_binary() + " temporal-data " + flags);
}

TEST(TemporalDataCommand, WritesShardsAndAManifestDeterministically) {
  TempDir dir("lmtrain_temporal_data");
  const std::string a = dir.file("a"), b = dir.file("b");
  const std::string common =
      " --num_samples 250 --shard_size 100 --seed 5 --length 32 64 --channels 2";
  const auto r = temporal_data("--output_dir " + a + common + " --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "temporal-data: wrote 250 samples in 3 shard(s)")) << r.output;
  EXPECT_TRUE(contains(r.output, "temporal-data done: 250 samples in "))
      << r.output;  // the last progress line
  const auto r2 = temporal_data("--output_dir=" + b + common + " --threads 2");
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  for (const std::string f :
       {"train_00000.jsonl", "train_00001.jsonl", "train_00002.jsonl", "temporal_data.json"}) {
    ASSERT_TRUE(fs::exists(a + "/" + f)) << f;
    EXPECT_EQ(core::sha256_file_hex(a + "/" + f), core::sha256_file_hex(b + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(a + "/train_00003.jsonl"));
  const auto m = nlohmann::json::parse(read_text(a + "/temporal_data.json"));
  EXPECT_EQ(m["format"], "lmtrain temporal-data");
  EXPECT_EQ(m["seed"], 5);
  EXPECT_EQ(m["num_samples"], 250);
  EXPECT_EQ(m["lengths"], nlohmann::json({32, 64}));
  EXPECT_EQ(m["channels"], 2);
  EXPECT_EQ(m["shards"].size(), 3u);
  EXPECT_EQ(m["shards"][2]["num_samples"], 50);
  EXPECT_EQ(m["shards"][2]["first_index"], 200);
  EXPECT_EQ(m["shards"][1]["sha256"], core::sha256_file_hex(a + "/train_00001.jsonl"));
  // A line is ChatTS's format plus the scoring fields.
  const std::string shard = read_text(a + "/train_00000.jsonl");
  const auto line = nlohmann::json::parse(shard.substr(0, shard.find('\n')));
  EXPECT_EQ(line["input"],
            "<ts><ts/>\nWhat is the trend of this series? Options: increasing, decreasing, "
            "flat.\nAnswer:");
  EXPECT_EQ(line["output"], " increasing");
  ASSERT_EQ(line["timeseries"].size(), 1u);
  EXPECT_EQ(line["timeseries"][0].size(), 2u);  // two channels
  EXPECT_EQ(line["task"], "trend");
  EXPECT_EQ(line["answer"], "increasing");
  EXPECT_EQ(line["attributes"]["trend"], "increasing");
  EXPECT_EQ(line["attributes"]["index"], 0);

  // Another seed: other values.
  ASSERT_EQ(temporal_data("--output_dir " + dir.file("c") +
                          " --num_samples 250 --shard_size 100 --seed 6 "
                          "--length 32 64 --channels 2")
                .exit_code,
            0);
  EXPECT_NE(core::sha256_file_hex(a + "/train_00000.jsonl"),
            core::sha256_file_hex(dir.file("c/train_00000.jsonl")));

  // An occupied output: refused, untouched; --overwrite moves it aside.
  const std::string before = core::sha256_file_hex(a + "/train_00000.jsonl");
  expect_refused(temporal_data("--output_dir " + a + " --num_samples 10"),
                 {a, "already holds", "--overwrite"});
  EXPECT_EQ(core::sha256_file_hex(a + "/train_00000.jsonl"), before);
  const auto o = temporal_data("--output_dir " + a + " --num_samples 10 --overwrite");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(a + "/temporal_data.json"))["num_samples"], 10);
  EXPECT_EQ(core::sha256_file_hex(a + "/previous-1/train_00000.jsonl"), before);
  EXPECT_FALSE(fs::exists(a + "/train_00001.jsonl"));
}

TEST(TemporalDataCommand, BadFlagsAreUsageErrorsAndHelpDescribesTheFormat) {
  TempDir dir("lmtrain_temporal_data");
  const std::string out = " --output_dir " + dir.file("x");
  expect_refused(temporal_data("--num_samples 5"), {"--output_dir"});
  expect_refused(temporal_data(out), {"--num_samples"});
  expect_refused(temporal_data(out + " --num_samples 0"), {"--num_samples"});
  expect_refused(temporal_data(out + " --num_samples 5 --length 8"), {"--length", "32"});
  expect_refused(temporal_data(out + " --num_samples 5 --length 64 abc"), {"--length", "abc"});
  expect_refused(temporal_data(out + " --num_samples 5 --channels 0"), {"--channels"});
  expect_refused(temporal_data(out + " --num_samples 5 --tasks trend colour"), {"colour"});
  expect_refused(temporal_data(out + " --num_samples 5 --shard_size 0"), {"--shard_size"});
  expect_refused(temporal_data(out + " --num_samples 5 --bogus"), {"--bogus"});
  EXPECT_FALSE(fs::exists(dir.file("x")));

  const auto h = temporal_data("--help");
  EXPECT_EQ(h.exit_code, 0);
  for (const char* part :
       {"--num_samples", "--output_dir", "--seed", "--length", "--channels", "--shard_size",
        "--overwrite", "temporal_data.json", "<ts><ts/>", "class-balanced"}) {
    EXPECT_TRUE(contains(h.output, part)) << part << "\n" << h.output;
  }
  EXPECT_TRUE(contains(run_command(lmtrain_binary() + " --help").output, "temporal-data"));
}

}  // namespace
}  // namespace lmtrain::testing
