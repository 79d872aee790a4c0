#include "data/prepare_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/fs.h"

namespace lmtrain::data {
namespace {

nlohmann::json header_of(const nlohmann::json& fingerprint) {
  return {{"journal", 1}, {"fingerprint", fingerprint}};
}

std::string changed_keys(const nlohmann::json& was, const nlohmann::json& now) {
  if (!was.is_object() || !now.is_object()) return "the journal's format";
  std::string out;
  for (const auto& [k, v] : now.items()) {
    if (!was.contains(k) || was[k] != v) out += (out.empty() ? "" : ", ") + k;
  }
  return out.empty() ? "the journal's format" : out;
}

}  // namespace

nlohmann::json PieceRecord::to_json() const {
  return {{"piece", index},
          {"next", {next.file, next.document}},
          {"train_tokens", train_tokens},
          {"val_tokens", val_tokens},
          {"documents", documents},
          {"train_documents", train_documents},
          {"val_documents", val_documents},
          {"train_bytes", train_bytes},
          {"val_bytes", val_bytes},
          {"piece_train_tokens", piece_train_tokens},
          {"piece_val_tokens", piece_val_tokens}};
}

PieceRecord PieceRecord::from_json(const nlohmann::json& j) {
  PieceRecord r;
  r.index = j.at("piece").get<uint64_t>();
  r.next.file = j.at("next").at(0).get<uint64_t>();
  r.next.document = j.at("next").at(1).get<uint64_t>();
  r.train_tokens = j.at("train_tokens").get<uint64_t>();
  r.val_tokens = j.at("val_tokens").get<uint64_t>();
  r.train_documents = j.at("train_documents").get<uint64_t>();
  r.val_documents = j.at("val_documents").get<uint64_t>();
  // Journals written before the split by position had one part per document.
  r.documents = j.value("documents", r.train_documents + r.val_documents);
  r.train_bytes = j.at("train_bytes").get<uint64_t>();
  r.val_bytes = j.at("val_bytes").get<uint64_t>();
  r.piece_train_tokens = j.at("piece_train_tokens").get<uint64_t>();
  r.piece_val_tokens = j.at("piece_val_tokens").get<uint64_t>();
  return r;
}

PrepareJournal::PrepareJournal(const std::string& staging_dir, const nlohmann::json& fingerprint)
    : path_(staging_dir + "/" + kFileName) {
  std::ifstream in(path_);
  std::vector<nlohmann::json> records;
  if (in) {
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) break;  // a torn last line: what follows it cannot be trusted
      records.push_back(std::move(j));
    }
  }
  if (!records.empty() && records[0].is_object() && records[0].value("journal", 0) == 1 &&
      records[0].contains("fingerprint") && records[0]["fingerprint"] == fingerprint) {
    matched_ = true;
    try {
      for (size_t i = 1; i < records.size(); ++i) {
        const auto& r = records[i];
        if (r.contains("hashes")) {
          state_.hashes = r;
        } else if (r.contains("tokenizer")) {
          state_.tokenizer = r["tokenizer"];
        } else if (r.contains("piece")) {
          PieceRecord p = PieceRecord::from_json(r);
          if (p.index != state_.pieces.size()) break;  // out of order: stop trusting it
          state_.pieces.push_back(p);
        }
      }
    } catch (const nlohmann::json::exception&) {
      // A record this version cannot read: keep what came before it.
    }
  } else if (!records.empty()) {
    difference_ = records[0].contains("fingerprint")
                      ? changed_keys(records[0]["fingerprint"], fingerprint)
                      : "the journal's format";
  }
  // Rewrite the journal with exactly what is trusted (drops a torn line).
  std::string text = header_of(fingerprint).dump() + "\n";
  if (matched_) {
    if (state_.hashes) text += state_.hashes->dump() + "\n";
    if (state_.tokenizer) text += nlohmann::json{{"tokenizer", *state_.tokenizer}}.dump() + "\n";
    for (const auto& p : state_.pieces) text += p.to_json().dump() + "\n";
  } else {
    state_ = JournalState{};
  }
  core::write_file_atomic(path_, text);
}

void PrepareJournal::append(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path_ + ": " + std::strerror(errno));
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw Error("cannot append to " + path_ + ": " + std::strerror(err));
}

void PrepareJournal::remove() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace lmtrain::data
