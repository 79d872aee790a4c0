// A streaming, tokenizing loader (issue 28's `data.source: stream`; not yet wired into the
// trainer): raw corpus units (data/stream/stream_units.h) dealt to ranks, read and tokenized on
// `tokenizer_threads` threads, every document followed by <|endoftext|> as `lmtrain prepare`
// writes it, packed into rows of T+1 tokens that overlap by one token as prepared windows do,
// B rows per batch, produced ahead into a bounded queue.
//
// Exact resume: each batch carries the position where the next one starts (epoch, unit of this
// rank, document of that unit, token of that document). A loader started at that position
// produces, bit for bit, what the uninterrupted one produced next, at any tokenizer_threads.
// A position belongs to one (rank, world size): another world size is refused.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"
#include "data/stream/stream_units.h"

namespace lmtrain::data {

struct StreamPosition {
  int64_t epoch = 0;
  int64_t unit = 0;      // index into this rank's units of the epoch (rank_units)
  int64_t document = 0;  // documents of that unit before the one the next row starts in
  int64_t token = 0;     // tokens of that document (with its <|endoftext|>) before the row
  int rank = 0, world = 1;

  bool operator==(const StreamPosition& o) const {
    return epoch == o.epoch && unit == o.unit && document == o.document && token == o.token &&
           rank == o.rank && world == o.world;
  }
  nlohmann::json to_json() const;
  // Throws lmtrain::Error naming what is missing.
  static StreamPosition from_json(const nlohmann::json& j);
  // As kValues numbers (epoch, unit, document, token, rank, world), e.g. for a collective that
  // gathers every rank's position; from_values reads kValues of them from `v`.
  static constexpr size_t kValues = 6;
  std::vector<int64_t> to_values() const { return {epoch, unit, document, token, rank, world}; }
  static StreamPosition from_values(const int64_t* v) {
    return {v[0], v[1], v[2], v[3], static_cast<int>(v[4]), static_cast<int>(v[5])};
  }
};

struct StreamOptions {
  DocumentReaderOptions reader;
  int64_t batch_rows = 8;  // B
  int64_t seq_len = 64;    // T: rows hold T+1 tokens
  uint64_t seed = 1337;
  bool shuffle = true;  // a new unit order each epoch; false: the listed order (validation)
  int tokenizer_threads = 1;
  size_t queue_batches = 4;        // produced ahead at most
  uint64_t chunk_bytes = 1 << 20;  // text one tokenizer task encodes
};

struct StreamBatch {
  std::vector<int64_t> rows;  // (batch_rows, seq_len + 1), row-major
  StreamPosition next;        // where the batch after this one starts: what a checkpoint keeps
};

// A rank whose units of an epoch hold no document at all (empty files, blank documents): its
// stream would never yield a row. Thrown by next(); the message gives the counts.
class NoStreamDocument : public Error {
 public:
  using Error::Error;
};

class StreamLoader {
 public:
  // Throws lmtrain::Error when `start` was saved at another world size or rank, or when this
  // rank would get no unit (fewer units than ranks).
  StreamLoader(std::vector<InputFile> files, std::vector<StreamUnit> units,
               const BpeTokenizer& tokenizer, StreamOptions options, int rank, int world,
               StreamPosition start);
  ~StreamLoader();  // stops the producer
  StreamLoader(const StreamLoader&) = delete;
  StreamLoader& operator=(const StreamLoader&) = delete;

  // The next batch (waits for the producer). Rethrows a reader's error (naming the file), and
  // NoStreamDocument when this rank's units of an epoch hold no document.
  StreamBatch next();
  // Seconds next() spent waiting for the producer, in all: 0 when the loader keeps ahead.
  double wait_seconds() const { return wait_seconds_; }
  // The most batches the queue held at once (never more than queue_batches).
  size_t max_queued() const;

 private:
  struct Coord {
    int64_t epoch, unit, document;
  };
  struct Segment {  // buf_[start, ...) holds tokens of `doc` from token `offset` on
    size_t start;
    Coord doc;
    int64_t offset;
  };
  void produce();
  void append_document(const Coord& c, const uint32_t* ids, size_t n);
  StreamPosition position_at(size_t p) const;
  void push(StreamBatch batch);

  std::vector<InputFile> files_;
  std::vector<StreamUnit> units_;
  const BpeTokenizer& tok_;
  StreamOptions opt_;
  int rank_, world_;
  StreamPosition start_;

  // Producer-side packing state.
  std::vector<uint32_t> buf_;
  size_t pos_ = 0;  // the next row starts at buf_[pos_]
  std::deque<Segment> segments_;
  std::vector<int64_t> rows_;
  int64_t skip_first_ = 0;  // tokens of the first document to drop (resume)
  bool first_document_ = true;

  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<StreamBatch> queue_;
  size_t max_queued_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  double wait_seconds_ = 0;
  std::thread producer_;
};

}  // namespace lmtrain::data
