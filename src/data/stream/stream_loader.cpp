#include "data/stream/stream_loader.h"

#include <chrono>
#include <future>
#include <memory>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::data {
namespace {

struct Stopped {};  // unwinds the producer when the loader is destroyed

}  // namespace

nlohmann::json StreamPosition::to_json() const {
  return {{"epoch", epoch}, {"unit", unit}, {"document", document},
          {"token", token}, {"rank", rank}, {"world", world}};
}

StreamPosition StreamPosition::from_json(const nlohmann::json& j) {
  StreamPosition p;
  try {
    p.epoch = j.at("epoch").get<int64_t>();
    p.unit = j.at("unit").get<int64_t>();
    p.document = j.at("document").get<int64_t>();
    p.token = j.at("token").get<int64_t>();
    p.rank = j.at("rank").get<int>();
    p.world = j.at("world").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("stream position: ") + e.what());
  }
  return p;
}

StreamLoader::StreamLoader(std::vector<InputFile> files, std::vector<StreamUnit> units,
                           const BpeTokenizer& tokenizer, StreamOptions options, int rank,
                           int world, StreamPosition start)
    : files_(std::move(files)),
      units_(std::move(units)),
      tok_(tokenizer),
      opt_(std::move(options)),
      rank_(rank),
      world_(world),
      start_(start) {
  if (start.world != world || start.rank != rank) {
    throw Error(log::format(
        "the stream position was saved by rank %d of %d; this is rank %d of %d: a streaming "
        "run resumes at the world size it was saved at (each rank's position is its own)",
        start.rank, start.world, rank, world));
  }
  if (units_.size() < static_cast<size_t>(world)) {
    throw Error(
        log::format("%zu stream units (files, parquet row groups) for %d ranks: every "
                    "rank needs one at least",
                    units_.size(), world));
  }
  if (opt_.batch_rows < 1 || opt_.seq_len < 1 || opt_.queue_batches < 1 ||
      opt_.tokenizer_threads < 1) {
    throw Error(
        "stream loader: batch_rows, seq_len, queue_batches, tokenizer_threads must be >= 1");
  }
  skip_first_ = start.token;
  producer_ = std::thread([this] { produce(); });
}

StreamLoader::~StreamLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (producer_.joinable()) producer_.join();
}

size_t StreamLoader::max_queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_queued_;
}

StreamBatch StreamLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  not_empty_.wait(lock, [&] { return !queue_.empty() || error_; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (queue_.empty()) std::rethrow_exception(error_);
  StreamBatch b = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  not_full_.notify_one();
  return b;
}

void StreamLoader::push(StreamBatch batch) {
  std::unique_lock<std::mutex> lock(mu_);
  not_full_.wait(lock, [&] { return queue_.size() < opt_.queue_batches || stop_; });
  if (stop_) throw Stopped{};
  queue_.push_back(std::move(batch));
  max_queued_ = std::max(max_queued_, queue_.size());
  lock.unlock();
  not_empty_.notify_one();
}

StreamPosition StreamLoader::position_at(size_t p) const {
  // The last segment starting at or before p holds it.
  size_t k = segments_.size() - 1;
  while (segments_[k].start > p) --k;
  const Segment& s = segments_[k];
  StreamPosition pos;
  pos.epoch = s.doc.epoch;
  pos.unit = s.doc.unit;
  pos.document = s.doc.document;
  pos.token = s.offset + static_cast<int64_t>(p - s.start);
  pos.rank = rank_;
  pos.world = world_;
  return pos;
}

void StreamLoader::append_document(const Coord& c, const uint32_t* ids, size_t n) {
  int64_t skip = 0;
  if (first_document_) {
    first_document_ = false;
    const bool at_start =
        c.epoch == start_.epoch && c.unit == start_.unit && c.document == start_.document;
    // A start at the beginning of a unit (every fresh run's) reads on past units that hold no
    // document (an empty file, only blank lines): its first document may be in a later one.
    const bool past_empty_units = start_.document == 0 && start_.token == 0 &&
                                  (c.epoch > start_.epoch || c.unit > start_.unit);
    if (!(at_start || past_empty_units) || skip_first_ > static_cast<int64_t>(n)) {
      throw Error(log::format(
          "the stream position (epoch %lld, unit %lld, document %lld, token %lld) is not in the "
          "corpus as it is now (its first document is epoch %lld, unit %lld, document %lld of "
          "%zu tokens): the input files changed since it was saved",
          (long long)start_.epoch, (long long)start_.unit, (long long)start_.document,
          (long long)start_.token, (long long)c.epoch, (long long)c.unit, (long long)c.document,
          n));
    }
    skip = skip_first_;
  }
  if (static_cast<size_t>(skip) == n) return;
  segments_.push_back({buf_.size(), c, skip});
  buf_.insert(buf_.end(), ids + skip, ids + n);
  const size_t row = static_cast<size_t>(opt_.seq_len) + 1;
  while (buf_.size() - pos_ >= row) {
    rows_.insert(rows_.end(), buf_.begin() + pos_, buf_.begin() + pos_ + row);
    pos_ += row - 1;  // the next row starts at this one's last token (inputs/targets overlap)
    if (rows_.size() == row * static_cast<size_t>(opt_.batch_rows)) {
      StreamBatch b;
      b.rows = std::move(rows_);
      rows_.clear();
      b.next = position_at(pos_);
      push(std::move(b));
    }
  }
  // Drop what every future row is past, keeping the segment that holds pos_.
  if (pos_ > (size_t{1} << 20)) {
    while (segments_.size() > 1 && segments_[1].start <= pos_) segments_.pop_front();
    Segment& s = segments_.front();
    s.offset += static_cast<int64_t>(pos_ - s.start);
    s.start = pos_;
    for (Segment& t : segments_) t.start -= pos_;
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
}

void StreamLoader::produce() {
  struct Chunk {
    std::vector<Coord> coords;
    std::vector<std::string> docs;
    uint64_t bytes = 0;
  };
  struct Encoded {
    std::vector<Coord> coords;
    std::vector<std::vector<uint32_t>> ids;
  };
  // Chunks tokenize on their own threads and are packed in the order they were read.
  std::deque<std::future<Encoded>> inflight;
  auto pack_front = [&]() {
    Encoded e = inflight.front().get();
    inflight.pop_front();
    for (size_t i = 0; i < e.coords.size(); ++i) {
      append_document(e.coords[i], e.ids[i].data(), e.ids[i].size());
    }
  };
  auto chunk = std::make_shared<Chunk>();
  auto submit = [&]() {
    if (chunk->docs.empty()) return;
    inflight.push_back(std::async(std::launch::async, [this, c = chunk]() {
      Encoded e;
      e.coords = c->coords;
      const uint32_t eot = tok_.eot_id();
      for (const std::string& d : c->docs) {
        e.ids.push_back(tok_.encode(d));
        e.ids.back().push_back(eot);
      }
      return e;
    }));
    chunk = std::make_shared<Chunk>();
    while (inflight.size() >= static_cast<size_t>(opt_.tokenizer_threads)) pack_front();
  };
  try {
    for (int64_t epoch = start_.epoch;; ++epoch) {
      const auto mine = rank_units(units_.size(), opt_.seed, epoch, rank_, world_, opt_.shuffle);
      int64_t documents = 0;
      const int64_t first_unit = epoch == start_.epoch ? start_.unit : 0;
      for (int64_t u = first_unit; u < static_cast<int64_t>(mine.size()); ++u) {
        const int64_t skip = epoch == start_.epoch && u == start_.unit ? start_.document : 0;
        int64_t d = 0;
        read_unit_documents(units_[mine[static_cast<size_t>(u)]], files_, opt_.reader,
                            [&](std::string& text) {
                              if (d >= skip) {
                                chunk->coords.push_back({epoch, u, d});
                                chunk->bytes += text.size();
                                chunk->docs.push_back(std::move(text));
                                if (chunk->bytes >= opt_.chunk_bytes) submit();
                              }
                              ++d;
                              ++documents;
                              return true;
                            });
      }
      if (documents == 0 && first_unit == 0) {
        throw NoStreamDocument(log::format(
            "rank %d of %d has no document to read: its %zu unit(s) of %zu in epoch %lld hold "
            "none (empty files or only blank documents); give more files with text, or run "
            "fewer ranks",
            rank_, world_, mine.size(), units_.size(), (long long)epoch));
      }
      submit();
    }
  } catch (const Stopped&) {
    for (auto& f : inflight) f.wait();
  } catch (...) {
    for (auto& f : inflight) f.wait();
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    not_empty_.notify_all();
  }
}

}  // namespace lmtrain::data
