// The cache `lmtrain temporal-data` writes and training reads (issue 26):
//   DIR/train_00000.jsonl, train_00001.jsonl, ...  samples 0..N-1 in order, shard_size per file,
//                                                   one JSON line each (temporal_jsonl.h)
//   DIR/lm_text.jsonl (with lm_text)                every sample as warm-up text for the LM
//   DIR/temporal_data.json                          the manifest: format, generator version,
//                                                   seed, num_samples, lengths, channels, tasks,
//                                                   shard_size, and per shard its file,
//                                                   first_index, num_samples, bytes, sha256
// Line j of shard k is sample first_index + j of the generator (generator.h), so the cache and
// online generation with the manifest's options give the same samples. The bytes depend on the
// options only, never on the thread count.
//
// A directory without a manifest is read as a folder of ChatTS JSONL files (*.jsonl, by name):
// public datasets, whose lines need only "input", "output" and "timeseries".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/temporal/generation_progress.h"
#include "data/temporal/generator.h"
#include "data/temporal/series_checks.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

inline constexpr const char* kTemporalManifest = "temporal_data.json";
inline constexpr const char* kLmTextFile = "lm_text.jsonl";
inline constexpr int64_t kTemporalFormatVersion = 1;

struct TemporalShardInfo {
  std::string file;  // name inside the directory
  int64_t first_index = 0;
  int64_t num_samples = 0;
  int64_t bytes = 0;
  std::string sha256;
};

struct TemporalManifest {
  GeneratorOptions generator;  // tasks: the list actually cycled (never empty here)
  int64_t generator_version = kGeneratorVersion;
  int64_t num_samples = 0;
  int64_t shard_size = 0;
  std::vector<TemporalShardInfo> shards;
};

// "train_00000.jsonl"
std::string temporal_shard_name(int64_t shard);

struct TemporalDataOptions {
  std::string output_dir;
  GeneratorOptions generator;
  int64_t num_samples = 0;
  int64_t shard_size = 10000;
  int threads = 0;         // generation threads; 0 = every core
  bool overwrite = false;  // core::OutputDir's --overwrite: the earlier content moves aside
  // Also DIR/lm_text.jsonl: {"text": warmup_text(sample, attribute_words(...))} per sample
  // (series_text.h: the curve described in words at the series' place), the corpus
  // `lmtrain prepare` turns into an LM's warm-up data.
  bool lm_text = false;
};

struct TemporalDataSummary {
  TemporalManifest manifest;
  int64_t bytes = 0;  // of every shard
  double seconds = 0;
  int threads = 1;
  std::string previous;  // where --overwrite moved the earlier content ("" when nothing)
};

// Generates and writes the cache through core::OutputDir (refusals as UsageError; nothing
// appears at output_dir until everything is written). UsageError for bad options.
TemporalDataSummary write_temporal_data(const TemporalDataOptions& options,
                                        const ProgressCallback& progress = {});

// DIR/temporal_data.json; Error (bad data) naming the file and key when it is not one.
TemporalManifest read_temporal_manifest(const std::string& dir);

// Random access to the samples of a cache (or a folder of JSONL files, or one JSONL file)
// without loading them: the constructor indexes the lines (and, with verify_checksums, checks
// each shard's sha256 and size against the manifest); sample(i) reads and parses one line.
// sample() may be called from several threads at once.
class TemporalDataReader {
 public:
  explicit TemporalDataReader(const std::string& path, const ReadOptions& options = {},
                              bool verify_checksums = false);
  ~TemporalDataReader();
  TemporalDataReader(const TemporalDataReader&) = delete;
  TemporalDataReader& operator=(const TemporalDataReader&) = delete;

  int64_t size() const { return static_cast<int64_t>(lines_.size()); }
  // Sample i in [0, size()); Error (bad data) "FILE:LINE: ..." for a bad line.
  TemporalSample sample(int64_t i) const;
  // The manifest of a cache; nullopt for plain JSONL files.
  const std::optional<TemporalManifest>& manifest() const { return manifest_; }

 private:
  struct Line {
    uint32_t file;
    uint32_t line_no;  // 1-based, for messages
    uint64_t offset;
    uint64_t length;
  };
  std::vector<std::string> files_;
  std::vector<int> fds_;
  std::vector<Line> lines_;
  std::optional<TemporalManifest> manifest_;
  ReadOptions options_;
};

// Every sample of a cache (checksums verified), a folder of JSONL files or one JSONL file.
std::vector<TemporalSample> read_temporal_dir(const std::string& path,
                                              const ReadOptions& options = {});

}  // namespace lmtrain::data::temporal
