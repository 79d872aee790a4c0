#include "train/stream_data.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/text_list.h"
#include "data/batch.h"
#include "data/corpus/document_reader.h"
#include "data/prepared_data.h"
#include "distributed/host_collectives.h"

namespace lmtrain::train {
namespace {

std::string stream_tokenizer_path(const DataOptions& options) {
  const std::string& explicit_path = options.stream.tokenizer;
  if (!explicit_path.empty()) return explicit_path;
  const std::string& data_dir = options.dir;
  if (data_dir.empty()) {
    throw UsageError(
        "data.source = stream needs a tokenizer: set data.stream.tokenizer to a tokenizer.json "
        "(one `lmtrain prepare` wrote, or an imported model's), or data.dir to a prepared "
        "directory holding one");
  }
  return data::require_data_file(data_dir, "tokenizer.json");
}

// The inputs a stream reads: every listed file, directories expanded, binary files inside a
// directory of text skipped (as `lmtrain prepare` does: fortune's *.dat index files), and empty
// files skipped (counted into *empty): they hold no document, as prepare finds.
std::vector<data::InputFile> stream_input_files(const StreamOptions& stream, size_t* empty) {
  std::vector<std::string> inputs;
  for (auto& p : core::split_list(stream.inputs)) {
    if (!p.empty()) inputs.push_back(std::move(p));
  }
  if (inputs.empty()) {
    throw UsageError(
        "data.source = stream needs data.stream.inputs: the corpus files or directories to "
        "tokenize on the fly, comma-separated (text, JSONL, .gz/.zst, parquet)");
  }
  std::vector<data::InputFile> files;
  std::vector<data::InputFile> listed;
  try {
    listed = data::list_input_files(inputs);
  } catch (const UsageError& e) {
    throw UsageError(std::string("data.stream.inputs: ") + e.what());
  }
  *empty = 0;
  for (auto& f : listed) {
    if (f.size == 0) {
      ++*empty;
      continue;
    }
    if (f.format == data::InputFormat::kText && data::is_binary_text_file(f)) continue;
    files.push_back(std::move(f));
  }
  if (files.empty()) {
    throw UsageError("data.stream.inputs = " + stream.inputs + " holds no text file to read" +
                     (*empty ? log::format(" (%zu empty file(s))", *empty) : std::string()));
  }
  return files;
}

}  // namespace

StreamData::StreamData(const DataOptions& options, uint64_t seed, int rank, int world)
    : tokenizer_path_(stream_tokenizer_path(options)),
      tokenizer_(data::BpeTokenizer::load_hf(tokenizer_path_)),
      files_(stream_input_files(options.stream, &empty_files_)),
      rank_(rank),
      world_(world),
      seq_len_(options.seq_len),
      seed_(seed),
      shuffle_(options.shuffle),
      tokenizer_threads_(options.stream.tokenizer_threads),
      queue_batches_(static_cast<size_t>(options.stream.queue_batches)) {
  reader_.text_column = options.stream.text_column;
  reader_.text_column_setting = "data.stream.text_column (--data.stream.text_column=NAME)";
  reader_.doc_separator = options.stream.doc_separator;
  const auto block_bytes = static_cast<uint64_t>(options.stream.block_mb * 1024 * 1024);
  units_ = data::split_stream_units(data::list_stream_units(files_, reader_, block_bytes), files_,
                                    options.stream.val_fraction, seed_);
  if (units_.train.size() < static_cast<size_t>(world)) {
    throw UsageError(log::format(
        "data.stream.inputs has %zu training unit(s) (files and parquet row groups, after "
        "data.stream.val_fraction's %zu held out) for %d ranks: every rank reads units of its "
        "own, so give at least as many files or row groups as ranks",
        units_.train.size(), units_.val.size(), world));
  }
  // The units, and so every saved position, depend on the files and on the block size.
  std::string listing = "block_bytes " + std::to_string(block_bytes) + "\n";
  for (const auto& f : files_) listing += f.path + "\t" + std::to_string(f.size) + "\n";
  fingerprint_ = core::sha256_hex(listing);
}

StreamData::~StreamData() = default;

data::StreamPosition StreamData::fresh_position() const {
  data::StreamPosition p;
  p.rank = rank_;
  p.world = world_;
  return p;
}

data::StreamOptions StreamData::loader_options(int64_t batch_rows, bool shuffle) const {
  data::StreamOptions o;
  o.reader = reader_;
  o.batch_rows = batch_rows;
  o.seq_len = seq_len_;
  o.seed = seed_;
  o.shuffle = shuffle;
  o.tokenizer_threads = tokenizer_threads_;
  o.queue_batches = queue_batches_;
  return o;
}

void StreamData::start(const data::StreamPosition& position, int64_t micro_batch,
                       int64_t max_val_windows) {
  micro_batch_ = micro_batch;
  position_ = position;
  // Validation first: its loader reads the held-out units once, in listed order, and stops at
  // the first row that would wrap into a second pass.
  val_rows_.clear();
  if (!units_.val.empty() && max_val_windows > 0) {
    data::StreamLoader val(files_, units_.val, tokenizer_, loader_options(1, /*shuffle=*/false), 0,
                           1, data::StreamPosition{});
    try {
      for (int64_t w = 0; w < max_val_windows; ++w) {
        auto b = val.next();
        if (b.next.epoch > 0) break;
        val_rows_.insert(val_rows_.end(), b.rows.begin(), b.rows.end());
      }
    } catch (const data::NoStreamDocument&) {
      // Held-out units without a document give no validation window: the run is not evaluated
      // (start_stream says so), as with val_fraction = 0.
      val_rows_.clear();
    }
  }
  loader_ = std::make_unique<data::StreamLoader>(files_, units_.train, tokenizer_,
                                                 loader_options(micro_batch, shuffle_), rank_,
                                                 world_, position);
}

int64_t StreamData::val_samples() const {
  return static_cast<int64_t>(val_rows_.size()) / (seq_len_ + 1);
}

Batch StreamData::train_batch(int64_t /*epoch*/, const std::vector<int64_t>& positions,
                              const c10::Device& device) {
  if (!loader_ || static_cast<int64_t>(positions.size()) != micro_batch_) {
    throw Error(log::format("stream data: %zu rows asked for, the loader makes batches of %lld",
                            positions.size(), (long long)micro_batch_));
  }
  auto b = loader_->next();
  position_ = b.next;
  auto [x, y] = data::make_batch_from_rows(b.rows.data(), micro_batch_, seq_len_, device);
  return Batch::lm(std::move(x), std::move(y));
}

Batch StreamData::val_batch(const std::vector<int64_t>& indices, const c10::Device& device) {
  const int64_t row = seq_len_ + 1;
  std::vector<int64_t> rows;
  rows.reserve(indices.size() * static_cast<size_t>(row));
  for (int64_t i : indices) {
    auto first = val_rows_.begin() + i * row;
    rows.insert(rows.end(), first, first + row);
  }
  auto [x, y] = data::make_batch_from_rows(rows.data(), static_cast<int64_t>(indices.size()),
                                           seq_len_, device);
  return Batch::lm(std::move(x), std::move(y));
}

nlohmann::json StreamData::checkpoint_state(dist::Group& group) const {
  const auto all = dist::all_gather_values(group, position_.to_values());
  nlohmann::json positions = nlohmann::json::array();
  for (size_t r = 0; r < all.size(); r += data::StreamPosition::kValues) {
    positions.push_back(data::StreamPosition::from_values(&all[r]).to_json());
  }
  return {{"positions", positions}, {"corpus", fingerprint_}};
}

data::StreamPosition StreamData::resume_position(const nlohmann::json& state, int rank) {
  return data::StreamPosition::from_json(state.at("positions").at(static_cast<size_t>(rank)));
}

double StreamData::wait_seconds() const { return loader_ ? loader_->wait_seconds() : 0.0; }

size_t StreamData::max_queued() const { return loader_ ? loader_->max_queued() : 0; }

std::string StreamData::describe() const {
  return log::format(
      "stream of %zu file(s)%s: %zu training unit(s), %zu validation unit(s) (%lld val windows), "
      "tokenized on %d thread(s), %zu micro-batches ahead at most",
      files_.size(), empty_files_ ? log::format(" (%zu empty skipped)", empty_files_).c_str() : "",
      units_.train.size(), units_.val.size(), (long long)val_samples(), tokenizer_threads_,
      queue_batches_);
}

}  // namespace lmtrain::train
