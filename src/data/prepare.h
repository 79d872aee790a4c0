// `lmtrain prepare`: corpus files -> tokenizer + train/val token shards, out of core.
//
// OUTPUT/tokenizer.json               Hugging Face tokenizer (trained, or the one given)
// OUTPUT/train_00000.bin, ...         token pieces of the training split, every document
//                                     followed by <|endoftext|>; read as one sequence
//                                     (data/token_split.h)
// OUTPUT/val_00000.bin, ...           the validation split, cut at the same places
// OUTPUT/prepare.json                 summary: every input file (size, sha256), counts, pieces
//
// Memory stays bounded whatever the corpus size: documents are streamed (data/corpus/), BPE is
// trained on a sample of at most tokenizer_train_bytes, and each thread encodes one chunk of
// documents at a time. The pieces come out in corpus order whatever the thread count, so the
// output is byte-identical at any number of threads. The output is written through
// core::OutputDir into PARENT/.NAME.partial with a journal (data/prepare_journal.h): a killed
// prepare run again with the same inputs and flags goes on from the last finished piece.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/prepare_progress.h"

namespace lmtrain::data {

struct PrepareOptions {
  // Text files, directories (walked recursively in sorted order), .jsonl / .ndjson, .gz or .zst
  // compressed text or JSONL, and .parquet (data/corpus/input_files.h).
  std::vector<std::string> inputs;
  std::string output_dir;
  int64_t vocab_size = 4096;   // total, including 256 bytes and <|endoftext|>
  double val_fraction = 0.05;  // share of documents held out, 0 < f < 1 (by content hash)
  uint64_t seed = 1337;        // of the train/val split and the tokenizer sample
  // If set, a line consisting only of this string (e.g. "%" for fortune files) separates
  // documents inside a text file; otherwise every text file is one document.
  std::string doc_separator;
  // The JSONL field / parquet column that holds the text.
  std::string text_column = "text";
  int num_threads = 0;  // for encoding; 0 = all cores
  // If set, encode with this tokenizer (a tokenizer.json, e.g. of an `lmtrain import hf` run, or
  // GPT-2's encoder.json) instead of training one; vocab_size is then the tokenizer's. Data for
  // fine-tuning a model that brings its own tokenizer.
  std::string tokenizer;
  // BPE trains on a sample of the training documents of at most this many bytes: the documents
  // with the smallest sample keys (data/document_hash.h), a uniform sample.
  uint64_t tokenizer_train_bytes = 100'000'000;
  // A new piece starts once the current training piece holds this many tokens.
  uint64_t shard_tokens = 100'000'000;
  // Text each thread encodes at once; a text document longer than max_document_bytes is cut.
  uint64_t chunk_bytes = 1 << 20;
  uint64_t max_document_bytes = uint64_t{64} << 20;
  // Add nanochat's chat tokens (<|bos|>, <|user_start|>, ...: data/chat/chat_format.h) to the
  // tokenizer it trains, within vocab_size, so `prepare --chat` can render nanochat's format.
  bool chat_tokens = false;
  bool overwrite = false;        // an existing, non-empty output is moved aside into previous-<n>/
  PrepareProgressFn progress;    // empty: log lines (log_prepare_progress)
  double progress_seconds = 10;  // between two reports of a phase
};

struct PrepareResult {
  size_t num_files = 0;                    // files read
  std::vector<std::string> skipped_files;  // binary files that were skipped
  size_t num_documents = 0, num_train_documents = 0, num_val_documents = 0;
  uint64_t num_bytes = 0;                     // bytes of document text
  uint64_t train_tokens = 0, val_tokens = 0;  // including one <|endoftext|> per document
  size_t num_pieces = 0;
  size_t vocab_size = 0;
  std::string tokenizer_hash;
  double train_seconds = 0, encode_seconds = 0;
  bool resumed = false;  // went on from an interrupted run's finished pieces
  size_t resumed_pieces = 0;
  size_t peak_reader_bytes = 0;  // the most one document reader held (the memory bound)
  std::string tokenizer_path, summary_path;
  std::vector<std::string> train_paths, val_paths;
};

// Throws lmtrain::UsageError for bad options or a missing input, lmtrain::Error otherwise.
PrepareResult run_prepare(const PrepareOptions& options);

}  // namespace lmtrain::data
