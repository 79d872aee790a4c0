// What a training run reads its data from (data.*), typed: read once by the command
// (cli/read_options.cpp) and handed to the training data (token_window_data.h, stream_data.h,
// temporal_setup.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/config_choice.h"

namespace lmtrain::train {

// data.source: the token shards of `lmtrain prepare`, or raw files tokenized on the fly.
enum class DataSource { kPrepared, kStream };
constexpr core::ChoiceKey choice_key(DataSource) { return {"data.source", 2}; }

// data.source = stream (stream_data.h): raw files tokenized on the fly.
struct StreamOptions {
  std::string inputs;         // data.stream.inputs: files or directories, comma-separated
  std::string tokenizer;      // data.stream.tokenizer (empty: data.dir's tokenizer.json)
  std::string text_column;    // data.stream.text_column
  std::string doc_separator;  // data.stream.doc_separator
  double val_fraction = 0;    // data.stream.val_fraction
  double block_mb = 0;        // data.stream.block_mb
  int64_t queue_batches = 0;  // data.stream.queue_batches
  int tokenizer_threads = 0;  // data.tokenizer_threads
};

// model.temporal.enabled: time-series QA samples (data.temporal.*, temporal_setup.h).
struct TemporalDataOptions {
  std::string dir;          // data.temporal.dir
  bool online = false;      // data.temporal.online
  int64_t num_samples = 0;  // data.temporal.num_samples
  int64_t seed = 0;         // data.temporal.seed
  std::string lengths;      // data.temporal.lengths (comma-separated)
  std::string tasks;        // data.temporal.tasks (comma-separated; empty = all)
  double val_fraction = 0;  // data.temporal.val_fraction
};

struct DataOptions {
  DataSource source = DataSource::kPrepared;  // data.source
  std::string dir;                            // data.dir
  int64_t seq_len = 0;                        // data.seq_len
  bool shuffle = false;                       // data.shuffle
  StreamOptions stream;
  TemporalDataOptions temporal;
};

}  // namespace lmtrain::train
