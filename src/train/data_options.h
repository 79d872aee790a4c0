// What a training run reads its data from (data.*), typed: read once by the command
// (cli/read_options.cpp) and handed to the training data (token_window_data.h, stream_data.h,
// temporal_setup.h).
#pragma once
#include <cstdint>
#include <string>

#include "core/config_choice.h"
#include "core/config_schema.h"

namespace lmtrain::train {

// data.source: the token shards of `lmtrain prepare`, or raw files tokenized on the fly.
enum class DataSource { kPrepared, kStream };
constexpr core::ChoiceKey choice_key(DataSource) { return {"data.source", 2}; }

// data.format: token windows of a corpus, or conversations with a loss mask (SFT: chat_data.h).
enum class DataFormat { kTokens, kChat };
constexpr core::ChoiceKey choice_key(DataFormat) { return {"data.format", 2}; }

// Each member starts at its key's schema default (core/config_schema.h).

// data.source = stream (stream_data.h): raw files tokenized on the fly.
struct StreamOptions {
  // Files or directories, comma-separated.
  std::string inputs = core::default_string("data.stream.inputs");
  // Empty: data.dir's tokenizer.json.
  std::string tokenizer = core::default_string("data.stream.tokenizer");
  std::string text_column = core::default_string("data.stream.text_column");
  std::string doc_separator = core::default_string("data.stream.doc_separator");
  double val_fraction = core::default_float("data.stream.val_fraction");
  double block_mb = core::default_float("data.stream.block_mb");
  int64_t queue_batches = core::default_int("data.stream.queue_batches");
  int tokenizer_threads = static_cast<int>(core::default_int("data.tokenizer_threads"));
};

// model.temporal.enabled: time-series QA samples (data.temporal.*, temporal_setup.h).
struct TemporalSampleOptions {
  std::string dir = core::default_string("data.temporal.dir");
  bool online = core::default_bool("data.temporal.online");
  int64_t num_samples = core::default_int("data.temporal.num_samples");
  int64_t seed = core::default_int("data.temporal.seed");
  std::string lengths = core::default_string("data.temporal.lengths");  // comma-separated
  // Comma-separated; empty = all.
  std::string tasks = core::default_string("data.temporal.tasks");
  double val_fraction = core::default_float("data.temporal.val_fraction");
};

struct DataOptions {
  DataSource source = core::default_choice<DataSource>();
  DataFormat format = core::default_choice<DataFormat>();
  // data.format = chat: a batch's width is its longest conversation rounded up to this.
  int64_t chat_bucket = core::default_int("data.chat.bucket");
  // data.format = chat: several conversations per row, document-masked (chat_packing.h).
  bool chat_pack = core::default_bool("data.chat.pack");
  // Token windows: attention within the documents <|endoftext|> ends (model/document_mask.h).
  bool document_mask = core::default_bool("data.document_mask");
  std::string dir = core::default_string("data.dir");
  int64_t seq_len = core::default_int("data.seq_len");
  bool shuffle = core::default_bool("data.shuffle");
  StreamOptions stream;
  TemporalSampleOptions temporal;
};

}  // namespace lmtrain::train
