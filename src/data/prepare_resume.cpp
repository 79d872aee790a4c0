// The staging dir of `lmtrain prepare` and its journal (data/prepare_journal.h): what a killed
// run finished is reused when the inputs and options are the same, else the run starts over.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/log.h"
#include "core/sha256.h"
#include "data/prepare_stages.h"

namespace lmtrain::data::prepare_detail {

namespace fs = std::filesystem;

namespace {

// What must be equal for a journal's finished work to be reused: the inputs as they are on
// disk and every option that changes the output (not the thread count: it changes nothing).
nlohmann::json fingerprint_of(const std::vector<InputFile>& files, const PrepareOptions& opt) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const InputFile& f : files) {
    std::error_code ec;
    const fs::path where = fs::weakly_canonical(fs::absolute(f.path), ec);
    inputs.push_back(
        {{"path", ec ? f.path : where.string()}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
  }
  nlohmann::json tokenizer = nullptr;
  if (!opt.tokenizer.empty()) {
    tokenizer = {{"path", opt.tokenizer}, {"sha256", core::sha256_file_hex(opt.tokenizer)}};
  }
  return {{"inputs", inputs},
          {"vocab_size", opt.tokenizer.empty() ? opt.vocab_size : 0},
          {"val_fraction", opt.val_fraction},
          {"seed", opt.seed},
          {"doc_separator", opt.doc_separator},
          {"text_column", opt.text_column},
          {"tokenizer", tokenizer},
          {"tokenizer_train_bytes", opt.tokenizer.empty() ? opt.tokenizer_train_bytes : 0},
          {"shard_tokens", opt.shard_tokens},
          {"max_document_bytes", opt.max_document_bytes},
          {"format", 1},
          {"chat_tokens", opt.chat_tokens}};
}

}  // namespace

PrepareJournal open_journal(const std::vector<InputFile>& all_files, const PrepareOptions& opt,
                            core::OutputDir& out, std::optional<nlohmann::json>& rehashed) {
  const std::string& stage = out.staging();
  const nlohmann::json fingerprint = fingerprint_of(all_files, opt);
  PrepareJournal journal(stage, fingerprint);
  if (!journal.matched()) {
    if (out.staging_existed()) {
      log::warn("prepare: " + stage + " holds an interrupted prepare of other inputs or flags (" +
                (journal.difference().empty() ? std::string("no journal") : journal.difference()) +
                " differ): starting over");
    }
    out.clear_staging();
    journal = PrepareJournal(stage, fingerprint);
  }
  // The fingerprint knows sizes and mtimes; an input edited in place with both kept still
  // matches it. So the inputs are hashed again before any finished work is trusted.
  if (journal.matched() && journal.state().hashes) {
    rehashed = hash_inputs(all_files, opt);
    const auto& was = (*journal.state().hashes)["hashes"];
    const auto& now = (*rehashed)["hashes"];
    for (size_t i = 0; i < all_files.size(); ++i) {
      if (i < was.size() && was[i] == now[i]) continue;
      log::warn("prepare: input " + all_files[i].path +
                " changed since the interrupted prepare in " + stage +
                " (its sha256 differs, though its size and modification time do not): starting "
                "over");
      out.clear_staging();
      journal = PrepareJournal(stage, fingerprint);
      break;
    }
  }
  return journal;
}

// Removes what a killed run left in the staging dir that its journal does not vouch for: shard
// temporaries and pieces after the last journaled one.
void remove_unjournaled(const std::string& stage, size_t pieces) {
  for (const auto& e : fs::directory_iterator(stage)) {
    const std::string name = e.path().filename().string();
    bool drop = name.find(".tmp.") != std::string::npos;
    for (const char* split : {"train_", "val_"}) {
      const size_t n = std::strlen(split);
      const std::string digits = name.substr(std::min(n, name.size()), 5);
      if (name.rfind(split, 0) == 0 && name.size() == n + 9 && name.substr(n + 5) == ".bin" &&
          std::all_of(digits.begin(), digits.end(),
                      [](char ch) { return ch >= '0' && ch <= '9'; })) {
        drop = drop || std::stoul(digits) >= pieces;
      }
    }
    if (drop) {
      std::error_code ec;
      fs::remove(e.path(), ec);
    }
  }
}

}  // namespace lmtrain::data::prepare_detail
