// The temporal-data cache (issue 26): the bytes do not depend on the thread count, the cache
// equals online generation, the manifest describes it, and a damaged cache is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "data/temporal/generation_progress.h"
#include "data/temporal/temporal_cache.h"
#include "data/temporal/temporal_jsonl.h"
#include "test_util.h"

namespace lmtrain::data::temporal {
namespace {

using testing::TempDir;

// `fn` must throw bad data (exit 1), not a UsageError (exit 2).
template <typename Fn>
void expect_bad_data(Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "bad data: " << e.what();
  }
}

TemporalDataOptions small_cache(const std::string& dir, int threads) {
  TemporalDataOptions o;
  o.output_dir = dir;
  o.generator.seed = 3;
  o.generator.lengths = {32, 48};
  o.generator.channels = 2;
  o.num_samples = 700;
  o.shard_size = 300;
  o.threads = threads;
  return o;
}

bool same_sample(const TemporalSample& a, const TemporalSample& b) {
  if (a.series.size() != b.series.size()) return false;
  for (size_t k = 0; k < a.series.size(); ++k) {
    const auto &x = a.series[k], &y = b.series[k];
    if (x.channels != y.channels || x.length != y.length || x.valid != y.valid ||
        std::memcmp(x.values.data(), y.values.data(), x.values.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return a.input == b.input && a.output == b.output && a.task == b.task && a.choices == b.choices &&
         a.answer == b.answer &&
         nlohmann::json::parse(a.attributes_json) == nlohmann::json::parse(b.attributes_json);
}

TEST(TemporalCache, TheBytesDoNotDependOnThreadsAndTheCacheEqualsOnlineGeneration) {
  TempDir dir;
  std::vector<GenerationProgress> seen;
  const auto one = write_temporal_data(small_cache(dir.file("one"), 1),
                                       [&](const GenerationProgress& p) { seen.push_back(p); });
  const auto three = write_temporal_data(small_cache(dir.file("three"), 3));
  EXPECT_EQ(three.threads, 3);
  ASSERT_EQ(one.manifest.shards.size(), 3u);
  for (const std::string name :
       {"train_00000.jsonl", "train_00001.jsonl", "train_00002.jsonl", "temporal_data.json"}) {
    EXPECT_EQ(core::sha256_file_hex(dir.file("one/" + name)),
              core::sha256_file_hex(dir.file("three/" + name)))
        << name;
  }
  // The progress rises to the total, on this thread.
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i].done, seen[i - 1].done);
  EXPECT_EQ(seen.back().done, 700);
  EXPECT_EQ(seen.back().total, 700);

  // The manifest.
  const TemporalManifest m = read_temporal_manifest(dir.file("one"));
  EXPECT_EQ(m.generator.seed, 3u);
  EXPECT_EQ(m.generator.lengths, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(m.generator.channels, 2);
  EXPECT_EQ(m.generator.tasks, temporal_tasks());
  EXPECT_EQ(m.generator_version, kGeneratorVersion);
  EXPECT_EQ(m.num_samples, 700);
  EXPECT_EQ(m.shard_size, 300);
  const std::vector<int64_t> firsts = {0, 300, 600}, counts = {300, 300, 100};
  for (size_t k = 0; k < 3; ++k) {
    const auto& s = m.shards[k];
    EXPECT_EQ(s.file, temporal_shard_name(static_cast<int64_t>(k)));
    EXPECT_EQ(s.first_index, firsts[k]);
    EXPECT_EQ(s.num_samples, counts[k]);
    EXPECT_EQ(s.sha256, core::sha256_file_hex(dir.file("one/" + s.file)));
    EXPECT_EQ(s.bytes, static_cast<int64_t>(std::filesystem::file_size(dir.file("one/" + s.file))));
  }

  // Cached equals online: every sample, by both readers.
  const auto all = read_temporal_dir(dir.file("one"));
  ASSERT_EQ(all.size(), 700u);
  const TemporalDataReader reader(dir.file("three"));
  ASSERT_EQ(reader.size(), 700);
  ASSERT_TRUE(reader.manifest().has_value());
  for (int64_t i = 0; i < 700; ++i) {
    const TemporalSample online = generate_sample(m.generator, i);
    EXPECT_TRUE(same_sample(all[static_cast<size_t>(i)], online)) << i;
    if (i % 7 == 0) {
      EXPECT_TRUE(same_sample(reader.sample(i), online)) << i;
    }
  }
  EXPECT_TRUE(same_sample(reader.sample(699), all[699]));
  EXPECT_THROW(reader.sample(700), Error);
}

TEST(TemporalCache, ADamagedOrIncompleteCacheIsRefusedNamingTheShard) {
  TempDir dir;
  write_temporal_data(small_cache(dir.file("c"), 2));
  const std::string shard = dir.file("c/train_00001.jsonl");
  std::string text = testing::read_text(shard);
  // One value changed, the line count kept: the checksum catches it.
  const size_t at = text.find("\"timeseries\":[[[") + 16;
  text[at] = text[at] == '1' ? '2' : '1';
  testing::write_text(shard, text);
  try {
    read_temporal_dir(dir.file("c"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "bad data: " << e.what();
    EXPECT_NE(std::string(e.what()).find("train_00001.jsonl"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sha256"), std::string::npos) << e.what();
  }
  EXPECT_EQ(TemporalDataReader(dir.file("c")).size(), 700);  // no checksums asked for
  // A line missing: the count against the manifest.
  testing::write_text(shard, text.substr(0, text.rfind('\n', text.size() - 2) + 1));
  try {
    TemporalDataReader r(dir.file("c"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "bad data: " << e.what();
    EXPECT_NE(std::string(e.what()).find("train_00001.jsonl: holds 299 samples"), std::string::npos)
        << e.what();
  }
  // A manifest that is not one.
  testing::write_text(dir.file("c/temporal_data.json"), "{\"format\": \"something else\"}");
  expect_bad_data([&] { read_temporal_dir(dir.file("c")); });
}

TEST(TemporalCache, AFolderWithoutAManifestIsReadAsJsonlFiles) {
  TempDir dir;
  testing::write_text(dir.file("b.jsonl"),
                      "{\"input\": \"<ts><ts/>\", \"output\": \"2\", \"timeseries\": [[2]]}\n");
  testing::write_text(dir.file("a.jsonl"),
                      "{\"input\": \"<ts><ts/>\", \"output\": \"0\", \"timeseries\": [[0]]}\n\n"
                      "{\"input\": \"<ts><ts/>\", \"output\": \"1\", \"timeseries\": [[1]]}");
  testing::write_text(dir.file("notes.txt"), "not data");
  const auto all = read_temporal_dir(dir.path());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].output, "0");
  EXPECT_EQ(all[1].output, "1");
  EXPECT_EQ(all[2].output, "2");
  const TemporalDataReader one(dir.file("a.jsonl"));
  EXPECT_EQ(one.size(), 2);
  EXPECT_FALSE(one.manifest().has_value());
  EXPECT_EQ(one.sample(1).series[0].values, (std::vector<float>{1}));
  testing::write_text(dir.file("a.jsonl"), "{\"input\": \"<ts><ts/>\", \"output\": \"0\"}\n");
  try {
    TemporalDataReader(dir.path()).sample(0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "bad data: " << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("a.jsonl") + ":1"), std::string::npos)
        << e.what();
  }
  TempDir empty;
  EXPECT_THROW(read_temporal_dir(empty.path()), UsageError);
  EXPECT_THROW(read_temporal_dir(empty.file("nothing")), UsageError);
}

TEST(TemporalCache, AnOccupiedOutputIsRefusedUnlessOverwrite) {
  TempDir dir;
  auto o = small_cache(dir.file("c"), 1);
  o.num_samples = 10;
  write_temporal_data(o);
  EXPECT_THROW(write_temporal_data(o), UsageError);
  o.overwrite = true;
  o.generator.seed = 4;
  const auto s = write_temporal_data(o);
  EXPECT_NE(s.previous, "");
  EXPECT_EQ(read_temporal_manifest(dir.file("c")).generator.seed, 4u);
  o.num_samples = 0;
  EXPECT_THROW(write_temporal_data(o), UsageError);
}

}  // namespace
}  // namespace lmtrain::data::temporal
