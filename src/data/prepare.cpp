// run_prepare: the stages of `lmtrain prepare` in order (data/prepare_stages.h), between the
// output's staging dir opened and committed.
#include "data/prepare.h"

#include <optional>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/output_dir.h"
#include "data/prepare_stages.h"
#include "data/token_split.h"

namespace lmtrain::data {

PrepareResult run_prepare(const PrepareOptions& opt) {
  using namespace prepare_detail;  // NOLINT(google-build-using-namespace): the stages run here
  validate(opt);
  PrepareResult res;

  // Inputs and the output's staging dir (a killed run's, when there is one).
  const std::vector<InputFile> all_files = list_input_files(opt.inputs);
  std::vector<std::string> guarded = opt.inputs;
  if (!opt.tokenizer.empty()) guarded.push_back(opt.tokenizer);
  core::OutputDir out(opt.output_dir, {"prepare", guarded, opt.overwrite, /*resumable=*/true});
  const std::string& stage = out.staging();
  std::optional<nlohmann::json> rehashed;
  PrepareJournal journal = open_journal(all_files, opt, out, rehashed);
  JournalState state = journal.state();
  std::vector<PieceRecord> records = state.pieces;
  remove_unjournaled(stage, records.size());
  res.resumed = !records.empty() || state.tokenizer.has_value();
  res.resumed_pieces = records.size();
  if (res.resumed) {
    log::info(log::format("prepare: resuming the interrupted prepare in %s (%zu pieces finished)",
                          stage.c_str(), records.size()));
  }

  // 1. Checksums; binary files among the text ones are skipped.
  if (!state.hashes) {
    state.hashes = rehashed ? *rehashed : hash_inputs(all_files, opt);
    journal.append(*state.hashes);
  }
  std::vector<bool> skipped;
  const std::vector<InputFile> files =
      text_files(all_files, *state.hashes, &skipped, &res.skipped_files);

  // 2. The tokenizer: trained on a sample of the training documents only, so validation text
  // stays unseen; or the one given (a model's own, so that its token ids mean what they meant
  // in pretraining). Either way encoding uses STAGING/tokenizer.json as written.
  res.tokenizer_path = stage + "/tokenizer.json";
  auto t0 = Clock::now();
  if (!state.tokenizer) {
    const nlohmann::json rec =
        make_tokenizer(files, opt, res.tokenizer_path, t0, &res.peak_reader_bytes);
    journal.append({{"tokenizer", rec}});
    state.tokenizer = rec;
  }
  const BpeTokenizer tok = load_journaled_tokenizer(res.tokenizer_path, *state.tokenizer, stage);
  res.train_seconds = state.tokenizer->value("seconds", seconds_since(t0));
  const bool by_position = state.tokenizer->value("split", "hash") == "position";
  const PiecedDocumentSizes pieced = journaled_pieced_documents(*state.tokenizer);

  // 3. Encode into pieces, on all threads.
  t0 = Clock::now();
  encode_corpus(files, opt, by_position ? &pieced : nullptr, tok, stage, journal, records,
                &res.peak_reader_bytes);
  res.encode_seconds = seconds_since(t0);
  const PieceRecord totals = records.empty() ? PieceRecord{} : records.back();
  check_counts(totals.documents, totals.train_documents, totals.val_documents, by_position, opt);
  count_output(totals, files.size(), records.size(), tok, res);

  // 4. prepare.json, then the output appears in one step.
  write_summary(stage, opt, all_files, skipped, state, records, totals, tok, by_position, res);
  journal.remove();
  out.commit();

  const std::string dir = out.path();
  res.tokenizer_path = dir + "/tokenizer.json";
  res.summary_path = dir + "/prepare.json";
  for (size_t k = 0; k < records.size(); ++k) {
    res.train_paths.push_back(dir + "/" + split_piece_name("train", k));
    res.val_paths.push_back(dir + "/" + split_piece_name("val", k));
  }
  log::info(log::format("wrote %s: tokenizer.json, %zu train and val pieces, prepare.json",
                        dir.c_str(), records.size()));
  return res;
}

}  // namespace lmtrain::data
