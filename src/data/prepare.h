// `lmtrain prepare`: text / JSONL files -> trained BPE tokenizer + train/val token shards.
//
// OUTPUT/tokenizer.json  Hugging Face tokenizer (BpeTokenizer::save_hf)
// OUTPUT/train.bin       token shard, every document followed by <|endoftext|>
// OUTPUT/val.bin         same for the validation documents
// OUTPUT/prepare.json    summary: inputs, document and token counts, tokenizer hash, seed
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain::data {

struct PrepareOptions {
  // Text files, directories (walked recursively in sorted order) and .jsonl files (one JSON
  // object with a "text" string per line).
  std::vector<std::string> inputs;
  std::string output_dir;
  int64_t vocab_size = 4096;   // total, including 256 bytes and <|endoftext|>
  double val_fraction = 0.05;  // share of documents held out, 0 < f < 1
  uint64_t seed = 1337;        // train/val split shuffle
  // If set, a line consisting only of this string (e.g. "%" for fortune files) separates
  // documents inside a text file; otherwise every text file is one document.
  std::string doc_separator;
  int num_threads = 0;  // for encoding; 0 = all cores
  // If set, encode with this tokenizer (a tokenizer.json, e.g. of an `lmtrain import hf` run, or
  // GPT-2's encoder.json) instead of training one; vocab_size is then the tokenizer's. Data for
  // fine-tuning a model that brings its own tokenizer.
  std::string tokenizer;
};

struct PrepareResult {
  size_t num_files = 0;                    // files read
  std::vector<std::string> skipped_files;  // binary files that were skipped
  size_t num_documents = 0, num_train_documents = 0, num_val_documents = 0;
  uint64_t num_bytes = 0;                     // bytes of document text
  uint64_t train_tokens = 0, val_tokens = 0;  // including one <|endoftext|> per document
  size_t vocab_size = 0;
  std::string tokenizer_hash;
  double train_seconds = 0, encode_seconds = 0;
  std::string tokenizer_path, train_path, val_path, summary_path;
};

// Throws lmtrain::UsageError for bad options or a missing input, lmtrain::Error otherwise.
PrepareResult run_prepare(const PrepareOptions& options);

}  // namespace lmtrain::data
