// Stage 2 of `lmtrain prepare`: the tokenizer, trained on a sample of the training documents
// only, so validation text stays unseen; or the one given (a model's own, so that its token ids
// mean what they meant in pretraining). Either way encoding uses STAGING/tokenizer.json as
// written, and the journal records its hash and the train/val split.
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/bpe_trainer.h"
#include "data/chat/chat_format.h"
#include "data/chat/chat_render.h"
#include "data/prepare_stages.h"

namespace lmtrain::data::prepare_detail {

namespace fs = std::filesystem;

namespace {

// The given tokenizer (opt.tokenizer) written to `path`; its hash and where it came from into
// the journal's `rec`.
void copy_given_tokenizer(const PrepareOptions& opt, const std::string& path, nlohmann::json& rec) {
  const auto given = BpeTokenizer::load(opt.tokenizer);
  log::info(log::format("tokenizer %s: vocab %zu, %zu merges", opt.tokenizer.c_str(),
                        given.vocab_size(), given.merges().size()));
  // A given tokenizer.json is copied as is (what its model was trained with), so
  // checkpoints that carry the same file hash equal; anything else is written in HF form.
  std::error_code ec;
  fs::copy_file(opt.tokenizer, path, fs::copy_options::overwrite_existing, ec);
  bool copied = false;
  try {
    copied = !ec && BpeTokenizer::load_hf(path).hash() == given.hash();
  } catch (const Error&) {
    copied = false;
  }
  if (!copied) given.save_hf(path);
  rec["hash"] = given.hash();
  rec["given"] = opt.tokenizer;
}

// A tokenizer trained on the `sample` (released as it is added) written to `path`; its hash and
// the sample's size into the journal's `rec`.
void train_tokenizer(const PrepareOptions& opt, std::vector<std::string>& sample,
                     const SampleStats& stats, const std::string& path, Clock::time_point t0,
                     nlohmann::json& rec) {
  BpeTrainerOptions topt;
  // nanochat's chat tokens come out of the same vocabulary (as nanochat's tok_train does).
  const size_t chat_tokens = opt.chat_tokens ? chat::nanochat_special_tokens().size() : 0;
  topt.vocab_size = static_cast<size_t>(opt.vocab_size) - chat_tokens;
  BpeTrainer trainer(topt);
  for (auto& d : sample) {
    trainer.add_document(d);
    std::string().swap(d);
  }
  auto trained = trainer.train();
  if (opt.chat_tokens)
    trained = chat::with_special_tokens(trained, chat::nanochat_special_tokens());
  log::info(log::format(
      "trained BPE tokenizer on %llu documents (%.2f MB) of %llu: vocab %zu, %zu merges, "
      "%zu unique words, %.2f s",
      static_cast<unsigned long long>(stats.documents), stats.bytes / 1e6,
      static_cast<unsigned long long>(stats.corpus_documents), trained.vocab_size(),
      trained.merges().size(), trainer.num_unique_words(), seconds_since(t0)));
  trained.save_hf(path);
  rec["hash"] = trained.hash();
  rec["sample_documents"] = stats.documents;
  rec["sample_bytes"] = stats.bytes;
  rec["seconds"] = seconds_since(t0);
}

}  // namespace

nlohmann::json make_tokenizer(const std::vector<InputFile>& files, const PrepareOptions& opt,
                              const std::string& path, Clock::time_point t0,
                              size_t* peak_reader_bytes) {
  nlohmann::json rec;
  SampleStats stats;
  std::vector<std::string> sample;
  const bool by_position = sample_and_split(files, opt, &sample, &stats, peak_reader_bytes);
  rec["split"] = by_position ? "position" : "hash";
  // The sizes of the documents read in pieces, which the split by position cuts by.
  nlohmann::json pieced = nlohmann::json::array();
  for (const auto& [first, size] : stats.pieced) {
    pieced.push_back({first.file, first.document, size});
  }
  rec["pieced_documents"] = pieced;
  if (!opt.tokenizer.empty()) {
    copy_given_tokenizer(opt, path, rec);
  } else {
    train_tokenizer(opt, sample, stats, path, t0, rec);
  }
  core::fsync_path(path);
  return rec;
}

BpeTokenizer load_journaled_tokenizer(const std::string& path, nlohmann::json& record,
                                      const std::string& stage) {
  BpeTokenizer tok = BpeTokenizer::load_hf(path);
  if (tok.hash() != record["hash"].get<std::string>()) {
    throw Error("prepare: " + path + " (tokenizer " + tok.hash() +
                ") is not the tokenizer its journal records (" + record["hash"].get<std::string>() +
                "): remove " + stage + " and run prepare again");
  }
  return tok;
}

PiecedDocumentSizes journaled_pieced_documents(const nlohmann::json& record) {
  PiecedDocumentSizes pieced;
  for (const auto& p : record.value("pieced_documents", nlohmann::json::array())) {
    pieced[{p.at(0).get<uint64_t>(), p.at(1).get<uint64_t>()}] = p.at(2).get<uint64_t>();
  }
  return pieced;
}

}  // namespace lmtrain::data::prepare_detail
