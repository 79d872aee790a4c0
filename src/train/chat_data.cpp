#include "train/chat_data.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "data/prepared_data.h"
#include "data/window_stream.h"
#include "model/gpt.h"
#include "train/chat_packing.h"

namespace lmtrain::train {
namespace {

data::TokenSplit open_chat_split(const std::string& dir, const std::string& split) {
  if (data::split_piece_paths(dir, split).empty()) {
    throw UsageError("data.format chat: " + dir + " has no " + split +
                     ".bin: write the data with `lmtrain prepare --chat`");
  }
  return data::TokenSplit::open(dir, split);
}

}  // namespace

ChatSplit::ChatSplit(const std::string& dir, const std::string& split,
                     const data::BpeTokenizer& tokenizer)
    : ids_(open_chat_split(dir, split)), mask_(open_chat_split(dir, split + "_mask")) {
  data::check_shard_hash(ids_, tokenizer.hash());
  data::check_shard_hash(mask_, tokenizer.hash());
  ids_.set_vocab_size(tokenizer.vocab_size());
  if (ids_.size() != mask_.size()) {
    throw UsageError(
        log::format("%s holds %zu ids but %s %zu mask values: the data dir is "
                    "damaged (re-run `lmtrain prepare --chat`)",
                    ids_.path().c_str(), ids_.size(), mask_.path().c_str(), mask_.size()));
  }
  // One pass over the mask: the conversation starts (value 2), in chunks.
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<int64_t> buf;
  for (size_t at = 0; at < mask_.size(); at += kChunk) {
    const size_t n = std::min(kChunk, mask_.size() - at);
    buf.resize(n);
    mask_.copy_window(at, n, buf.data());
    for (size_t k = 0; k < n; ++k) {
      if (buf[k] > 2 || (at + k == 0 && buf[k] != 2)) {
        throw UsageError(
            log::format("%s: value %lld at token %zu is not a loss mask's (0, 1, or "
                        "2 at each conversation's start)",
                        mask_.path().c_str(), (long long)buf[k], at + k));
      }
      if (buf[k] == 2) starts_.push_back(static_cast<int64_t>(at + k));
    }
  }
  starts_.push_back(static_cast<int64_t>(mask_.size()));
}

int64_t ChatSplit::length(int64_t i) const {
  return starts_.at(static_cast<size_t>(i) + 1) - starts_.at(static_cast<size_t>(i));
}

void ChatSplit::conversation(int64_t i, int64_t max_len, std::vector<int64_t>* ids,
                             std::vector<uint8_t>* target) const {
  const int64_t n = std::min(length(i), max_len);
  const auto start = static_cast<size_t>(starts_.at(static_cast<size_t>(i)));
  ids->resize(static_cast<size_t>(n));
  ids_.copy_window(start, static_cast<size_t>(n), ids->data());
  std::vector<int64_t> m(static_cast<size_t>(n));
  mask_.copy_window(start, static_cast<size_t>(n), m.data());
  target->resize(static_cast<size_t>(n));
  for (size_t k = 0; k < m.size(); ++k) (*target)[k] = m[k] == 1;
}

Batch chat_batch(const std::vector<std::vector<int64_t>>& ids,
                 const std::vector<std::vector<uint8_t>>& targets, int64_t seq_len, int64_t bucket,
                 const c10::Device& device) {
  const auto B = static_cast<int64_t>(ids.size());
  int64_t longest = 1;
  for (const auto& r : ids)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.size()) - 1);
  const int64_t W = std::min(seq_len, (longest + bucket - 1) / bucket * bucket);
  auto x = torch::zeros({B, W}, torch::kLong);  // padding id 0: its targets are ignored
  auto y = torch::full({B, W}, model::kIgnoreIndex, torch::kLong);
  auto xa = x.accessor<int64_t, 2>();
  auto ya = y.accessor<int64_t, 2>();
  int64_t valid = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& r = ids[static_cast<size_t>(b)];
    const auto& t = targets[static_cast<size_t>(b)];
    const int64_t n = std::min<int64_t>(W, static_cast<int64_t>(r.size()) - 1);
    for (int64_t j = 0; j < n; ++j) {
      xa[b][j] = r[static_cast<size_t>(j)];
      if (t[static_cast<size_t>(j) + 1]) {
        ya[b][j] = r[static_cast<size_t>(j) + 1];
        ++valid;
      }
    }
  }
  Batch batch;
  batch.valid_tokens = valid;
  batch.masked = valid < B * W;
  batch.tensors.emplace("inputs", x.to(device));
  batch.tensors.emplace("targets", y.to(device));
  return batch;
}

ChatData::ChatData(const std::string& data_dir, int64_t seq_len, int64_t bucket, uint64_t seed,
                   bool shuffle, bool pack)
    : tokenizer_path_(data::require_data_file(data_dir, "tokenizer.json")),
      tokenizer_(data::BpeTokenizer::load_hf(tokenizer_path_)),
      train_(data_dir, "train", tokenizer_),
      val_(data_dir, "val", tokenizer_),
      seq_len_(seq_len),
      bucket_(bucket),
      seed_(seed),
      shuffle_(shuffle),
      pack_(pack) {
  int64_t cut = 0;
  for (int64_t i = 0; i < train_.conversations(); ++i) cut += train_.length(i) > seq_len + 1;
  if (cut > 0) {
    log::warn(
        log::format("data: %lld of %lld training conversations are longer than "
                    "data.seq_len + 1 = %lld tokens and are cut there",
                    (long long)cut, (long long)train_.conversations(), (long long)(seq_len + 1)));
  }
  if (pack_) {
    // Packed once, in an order of the seed's (not the epoch's), so the rows and their number
    // are the same in every epoch and at every world size; the epochs shuffle the rows.
    std::vector<int64_t> val_order(static_cast<size_t>(val_.conversations()));
    for (size_t i = 0; i < val_order.size(); ++i) val_order[i] = static_cast<int64_t>(i);
    train_rows_ = pack_split(train_, data::seeded_permutation(train_.conversations(), seed_,
                                                              /*stream=*/0x7061636bULL));
    val_rows_ = pack_split(val_, val_order);
    log::info(log::format("data: %lld training conversations packed into %lld rows of %lld tokens",
                          (long long)train_.conversations(), (long long)train_rows_.size(),
                          (long long)seq_len_));
  }
}

std::vector<std::vector<int64_t>> ChatData::pack_split(const ChatSplit& split,
                                                       const std::vector<int64_t>& order) const {
  std::vector<int64_t> widths(static_cast<size_t>(split.conversations()));
  for (size_t i = 0; i < widths.size(); ++i) widths[i] = split.length(static_cast<int64_t>(i)) - 1;
  return pack_conversations(widths, order, seq_len_);
}

Batch ChatData::batch_of(const ChatSplit& split, const std::vector<std::vector<int64_t>>& rows,
                         const std::vector<int64_t>& samples, const c10::Device& device) const {
  if (pack_) {
    std::vector<std::vector<PackedPart>> parts(samples.size());
    for (size_t k = 0; k < samples.size(); ++k) {
      for (int64_t c : rows.at(static_cast<size_t>(samples[k]))) {
        PackedPart part;
        split.conversation(c, seq_len_ + 1, &part.ids, &part.target);
        parts[k].push_back(std::move(part));
      }
    }
    return packed_chat_batch(parts, seq_len_, bucket_, device);
  }
  const std::vector<int64_t>& conversations = samples;
  std::vector<std::vector<int64_t>> ids(conversations.size());
  std::vector<std::vector<uint8_t>> targets(conversations.size());
  for (size_t k = 0; k < conversations.size(); ++k) {
    split.conversation(conversations[k], seq_len_ + 1, &ids[k], &targets[k]);
  }
  return chat_batch(ids, targets, seq_len_, bucket_, device);
}

Batch ChatData::train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                            const c10::Device& device) {
  const int64_t n = train_samples();
  if (epoch != order_epoch_) {
    if (shuffle_) {
      order_ = data::seeded_permutation(n, seed_, static_cast<uint64_t>(epoch));
    } else {
      order_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
    }
    order_epoch_ = epoch;
  }
  std::vector<int64_t> conversations;
  for (int64_t p : positions) conversations.push_back(order_.at(static_cast<size_t>(p)));
  return batch_of(train_, train_rows_, conversations, device);
}

Batch ChatData::val_batch(const std::vector<int64_t>& indices, const c10::Device& device) {
  return batch_of(val_, val_rows_, indices, device);
}

}  // namespace lmtrain::train
