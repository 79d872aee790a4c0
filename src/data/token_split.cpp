#include "data/token_split.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "data/prepared_data.h"

namespace lmtrain::data {
namespace {

namespace fs = std::filesystem;

// The number of pieces DIR/prepare.json records for a split, or -1 when it records none (an
// older prepare, or no prepare.json).
int64_t recorded_pieces(const std::string& dir, const std::string& split) {
  std::ifstream in(dir + "/prepare.json");
  if (!in) return -1;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("pieces") || !j["pieces"].is_object()) return -1;
  const auto& p = j["pieces"];
  if (!p.contains(split) || !p[split].is_number_integer()) return -1;
  return p[split].get<int64_t>();
}

}  // namespace

std::string split_piece_name(const std::string& split, size_t index) {
  return split + log::format("_%05zu.bin", index);
}

std::vector<std::string> split_piece_paths(const std::string& dir, const std::string& split) {
  const std::string single = dir + "/" + split + ".bin";
  std::vector<std::string> pieces;
  std::error_code ec;
  for (size_t i = 0;; ++i) {
    const std::string p = dir + "/" + split_piece_name(split, i);
    if (!fs::exists(p, ec)) break;
    pieces.push_back(p);
  }
  // A later piece after a gap is a damaged dir, not the end of the split.
  const std::string after_gap = dir + "/" + split_piece_name(split, pieces.size() + 1);
  if (fs::exists(after_gap, ec)) {
    throw Error("data dir " + dir + ": " + split_piece_name(split, pieces.size()) +
                " is missing but " + split_piece_name(split, pieces.size() + 1) +
                " exists: the split is incomplete (re-run `lmtrain prepare`)");
  }
  const bool has_single = fs::exists(single, ec);
  if (has_single && !pieces.empty()) {
    throw Error("data dir " + dir + " holds both " + split + ".bin and " +
                split_piece_name(split, 0) +
                ": which one is the split is ambiguous (remove the one you do not mean)");
  }
  if (has_single) return {single};
  const int64_t recorded = recorded_pieces(dir, split);
  if (recorded >= 0 && static_cast<size_t>(recorded) != pieces.size()) {
    throw Error(log::format(
        "data dir %s: prepare.json records %lld %s pieces but %zu are there: the split is "
        "incomplete (re-run `lmtrain prepare`)",
        dir.c_str(), static_cast<long long>(recorded), split.c_str(), pieces.size()));
  }
  return pieces;
}

TokenSplit::TokenSplit(std::vector<std::string> piece_paths) {
  if (piece_paths.empty()) throw Error("a token split needs at least one shard file");
  offsets_.push_back(0);
  for (const std::string& p : piece_paths) {
    pieces_.emplace_back(p);
    const TokenShard& s = pieces_.back();
    const TokenShard& first = pieces_.front();
    if (s.dtype_bytes() != first.dtype_bytes() || s.tokenizer_hash() != first.tokenizer_hash()) {
      throw Error("token shard " + p + " (dtype " + std::to_string(s.dtype_bytes()) +
                  " bytes, tokenizer " + s.tokenizer_hash() + ") does not match " + first.path() +
                  " (dtype " + std::to_string(first.dtype_bytes()) + " bytes, tokenizer " +
                  first.tokenizer_hash() + "): pieces of one split come from one prepare");
    }
    offsets_.push_back(offsets_.back() + s.size());
  }
  description_ =
      piece_paths.size() == 1
          ? piece_paths[0]
          : log::format("%s .. %s (%zu pieces)", piece_paths.front().c_str(),
                        fs::path(piece_paths.back()).filename().c_str(), piece_paths.size());
}

TokenSplit TokenSplit::open(const std::string& dir, const std::string& split) {
  if (dir.empty()) require_data_file(dir, split + ".bin");  // throws the data.dir message
  auto paths = split_piece_paths(dir, split);
  if (paths.empty()) {
    throw UsageError("config key 'data.dir' = '" + dir + "': neither " + split + ".bin nor " +
                     split_piece_name(split, 0) + " found (run `lmtrain prepare --output " + dir +
                     "` first)");
  }
  return TokenSplit(std::move(paths));
}

std::vector<std::string> TokenSplit::piece_paths() const {
  std::vector<std::string> out;
  for (const auto& p : pieces_) out.push_back(p.path());
  return out;
}

void TokenSplit::set_vocab_size(size_t vocab_size) {
  for (auto& p : pieces_) p.set_vocab_size(vocab_size);
}

uint32_t TokenSplit::at(size_t i) const {
  if (i >= size()) {
    throw Error("token index " + std::to_string(i) + " is outside split " + description_ + " (" +
                std::to_string(size()) + " tokens)");
  }
  const size_t k = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), i) -
                                       offsets_.begin() - 1);
  return pieces_[k].at(i - offsets_[k]);
}

void TokenSplit::copy_window(size_t start, size_t len, int64_t* out) const {
  if (start > size() || len > size() - start) {
    throw Error("window [" + std::to_string(start) + ", " + std::to_string(start + len) +
                ") is outside split " + description_ + " (" + std::to_string(size()) + " tokens)");
  }
  size_t k = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), start) -
                                 offsets_.begin() - 1);
  while (len > 0) {
    // Empty pieces (a val piece with no document) hold nothing: step over them.
    const size_t local = start - offsets_[k];
    const size_t n = std::min(len, pieces_[k].size() - local);
    if (n > 0) pieces_[k].copy_window(local, n, out);
    out += n;
    start += n;
    len -= n;
    ++k;
  }
}

}  // namespace lmtrain::data
