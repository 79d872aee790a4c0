// Training data of a streaming run (data.source = stream): the raw files of data.stream.inputs,
// tokenized on the fly. Each rank reads its own units (files, parquet row groups) through a
// data::StreamLoader, so there is no global sample list: train_batch() returns this rank's next
// rows, and where a rank is in the stream (data::StreamPosition) is its own. A checkpoint keeps
// every rank's position, and a resumed run is bitwise the uninterrupted one at the same world
// size; another world size is refused, since each rank's units would change.
//
// Validation reads the held-out units (data.stream.val_fraction, chosen by name hash) once, in
// listed order, and keeps the first windows an evaluation uses (train.eval_batches *
// micro-batch * world size); they overlap by one token like every other window.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/corpus/input_files.h"
#include "data/stream/stream_loader.h"
#include "data/stream/stream_units.h"
#include "distributed/group.h"
#include "train/data_options.h"
#include "train/training_data.h"

namespace lmtrain::train {

class StreamData : public TrainingData {
 public:
  // Lists data.stream.inputs and opens the tokenizer; the loader starts in start(). seed:
  // train.seed (the units' order and validation split). Throws UsageError naming the key when
  // data.stream.inputs or the tokenizer is missing.
  StreamData(const DataOptions& options, uint64_t seed, int rank, int world);
  ~StreamData() override;

  // The position of a fresh run on this rank.
  data::StreamPosition fresh_position() const;
  // Starts this rank's loader at `position`, producing rows of micro_batch x (T + 1) tokens,
  // and reads the validation windows (up to max_val_windows).
  void start(const data::StreamPosition& position, int64_t micro_batch, int64_t max_val_windows);

  bool streamed() const override { return true; }
  int64_t train_samples() const override { return 0; }  // unknown: a stream has no sample list
  int64_t val_samples() const override;
  int64_t row_tokens() const override { return seq_len_; }
  // This rank's next positions.size() rows (the positions themselves are not used: a stream is
  // read in order). positions.size() must be the micro-batch given to start().
  Batch train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                    const c10::Device& device) override;
  Batch val_batch(const std::vector<int64_t>& indices, const c10::Device& device) override;
  std::string sample_name() const override { return "windows"; }

  // Where the row after the last one returned starts: what a checkpoint keeps for this rank.
  const data::StreamPosition& position() const { return position_; }
  // Collective: every rank's position (by rank) and the corpus fingerprint, as a checkpoint
  // keeps them ({"positions": [...], "corpus": ...}; TrainingState::stream).
  nlohmann::json checkpoint_state(dist::Group& group) const;
  // This rank's position in such a state (the caller checked world size and corpus).
  static data::StreamPosition resume_position(const nlohmann::json& state, int rank);
  // Seconds train_batch() waited for the tokenizer threads, in all.
  double wait_seconds() const;
  // The most micro-batches the prefetch queue held at once.
  size_t max_queued() const;

  const data::BpeTokenizer& tokenizer() const { return tokenizer_; }
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  // sha256 of every input file's path and size: a checkpoint's position holds only over the same
  // files. Printable summary: "N files, U units (u train, v val)".
  const std::string& corpus_fingerprint() const { return fingerprint_; }
  std::string describe() const;

 private:
  data::StreamOptions loader_options(int64_t batch_rows, bool shuffle) const;

  std::string tokenizer_path_;
  data::BpeTokenizer tokenizer_;
  size_t empty_files_ = 0;  // inputs of 0 bytes, skipped (declared before files_: set with it)
  std::vector<data::InputFile> files_;
  data::StreamSplit units_;
  std::string fingerprint_;
  data::DocumentReaderOptions reader_;
  int rank_, world_;
  int64_t seq_len_;
  uint64_t seed_;
  bool shuffle_;
  int tokenizer_threads_;
  size_t queue_batches_;

  int64_t micro_batch_ = 0;
  std::unique_ptr<data::StreamLoader> loader_;
  data::StreamPosition position_;
  std::vector<int64_t> val_rows_;  // (val windows, T + 1), row-major
};

}  // namespace lmtrain::train
