// Stage 4 of `lmtrain prepare`: the counts of the output (into PrepareResult and the log) and
// its summary, prepare.json.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/fs.h"
#include "core/log.h"
#include "data/prepare_stages.h"
#include "data/token_shard.h"

namespace lmtrain::data::prepare_detail {
namespace {

using Json = nlohmann::ordered_json;

// Tokens of document text: all but the <|endoftext|> after each document.
uint64_t text_tokens_of(const PrepareResult& res, const PieceRecord& totals) {
  const uint64_t n = totals.documents;
  return res.train_tokens + res.val_tokens - n;
}

}  // namespace

void count_output(const PieceRecord& totals, size_t num_files, size_t num_pieces,
                  const BpeTokenizer& tok, PrepareResult& res) {
  const uint64_t n = totals.documents;
  res.num_files = num_files;
  res.num_documents = n;
  res.num_train_documents = totals.train_documents;
  res.num_val_documents = totals.val_documents;
  res.num_bytes = totals.train_bytes + totals.val_bytes;
  res.train_tokens = totals.train_tokens;
  res.val_tokens = totals.val_tokens;
  res.num_pieces = num_pieces;
  res.vocab_size = tok.vocab_size();
  res.tokenizer_hash = tok.hash();
  const uint64_t text_tokens = text_tokens_of(res, totals);
  log::info(log::format(
      "encoded %.2f MB in %.2f s (%.2f MB/s): train %llu tokens (%zu docs), val %llu tokens "
      "(%zu docs), %.2f bytes/token, %zu pieces",
      res.num_bytes / 1e6, res.encode_seconds,
      res.num_bytes / 1e6 / std::max(res.encode_seconds, 1e-9),
      static_cast<unsigned long long>(res.train_tokens), res.num_train_documents,
      static_cast<unsigned long long>(res.val_tokens), res.num_val_documents,
      text_tokens ? static_cast<double>(res.num_bytes) / text_tokens : 0.0, res.num_pieces));
}

void write_summary(const std::string& stage, const PrepareOptions& opt,
                   const std::vector<InputFile>& all_files, const std::vector<bool>& skipped,
                   JournalState& state, const std::vector<PieceRecord>& records,
                   const PieceRecord& totals, const BpeTokenizer& tok, bool by_position,
                   const PrepareResult& res) {
  const uint64_t n = totals.documents;
  const uint64_t text_tokens = text_tokens_of(res, totals);
  const auto& hashes = (*state.hashes)["hashes"];
  Json s;
  s["inputs"] = opt.inputs;
  Json listed = Json::array();
  for (size_t i = 0; i < all_files.size(); ++i) {
    Json f = {{"path", all_files[i].path},
              {"format", describe_format(all_files[i])},
              {"size", all_files[i].size},
              {"sha256", hashes.at(i).get<std::string>()}};
    if (skipped[i]) f["skipped"] = "binary";
    listed.push_back(f);
  }
  s["input_files"] = listed;
  s["files"] = res.num_files;
  s["skipped_files"] = res.skipped_files;
  s["doc_separator"] = opt.doc_separator;
  s["text_column"] = opt.text_column;
  if (!opt.tokenizer.empty()) {
    s["tokenizer"] = opt.tokenizer;
  } else {
    s["tokenizer_sample"] = {{"documents", (*state.tokenizer)["sample_documents"]},
                             {"bytes", (*state.tokenizer)["sample_bytes"]},
                             {"limit", opt.tokenizer_train_bytes}};
  }
  s["documents"] = {{"total", n}, {"train", totals.train_documents}, {"val", totals.val_documents}};
  s["bytes"] = {{"total", res.num_bytes}, {"train", totals.train_bytes}, {"val", totals.val_bytes}};
  s["tokens"] = {{"train", res.train_tokens}, {"val", res.val_tokens}};
  s["pieces"] = {{"train", records.size()}, {"val", records.size()}};
  Json piece_tokens = Json::array();
  for (const auto& r : records) {
    piece_tokens.push_back({{"train", r.piece_train_tokens}, {"val", r.piece_val_tokens}});
  }
  s["piece_tokens"] = piece_tokens;
  s["shard_tokens"] = opt.shard_tokens;
  s["bytes_per_token"] = text_tokens ? static_cast<double>(res.num_bytes) / text_tokens : 0.0;
  s["vocab_size"] = res.vocab_size;
  s["eot_id"] = tok.eot_id();
  s["dtype_bytes"] = shard_dtype_for_vocab(tok.vocab_size());
  s["tokenizer_hash"] = res.tokenizer_hash;
  s["val_fraction"] = opt.val_fraction;
  s["split"] = by_position
                   ? "by position: the last val_fraction of each document's bytes, cut at a "
                     "line boundary (data/position_split.h)"
                   : "by document content hash (data/document_hash.h)";
  s["seed"] = opt.seed;
  s["train_seconds"] = res.train_seconds;
  s["encode_seconds"] = res.encode_seconds;
  s["resumed_pieces"] = res.resumed_pieces;
  core::write_file_atomic(stage + "/prepare.json",
                          s.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

}  // namespace lmtrain::data::prepare_detail
