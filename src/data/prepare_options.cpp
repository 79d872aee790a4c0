// The options of `lmtrain prepare` checked, and what its stages take of them.
#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "data/prepare_stages.h"

namespace lmtrain::data::prepare_detail {

namespace fs = std::filesystem;

void validate(const PrepareOptions& opt) {
  if (opt.inputs.empty()) throw UsageError("prepare: no input files given");
  if (opt.output_dir.empty()) throw UsageError("prepare: no output directory given");
  if (opt.tokenizer.empty() && opt.vocab_size < 257) {
    throw UsageError("prepare: vocab_size must be at least 257 (256 bytes + <|endoftext|>), got " +
                     std::to_string(opt.vocab_size));
  }
  if (opt.chat_tokens && !opt.tokenizer.empty()) {
    throw UsageError(
        "prepare: --chat_tokens adds nanochat's tokens to the tokenizer prepare "
        "trains; a given --tokenizer is used as it is");
  }
  if (opt.chat_tokens && opt.vocab_size < 257 + 9) {
    throw UsageError(
        "prepare: --chat_tokens needs --vocab_size of at least 266 (256 bytes, "
        "<|endoftext|> and nanochat's 9 chat tokens)");
  }
  if (!(opt.val_fraction > 0 && opt.val_fraction < 1)) {
    throw UsageError(
        log::format("prepare: val_fraction must be between 0 and 1, got %g", opt.val_fraction));
  }
  if (opt.text_column.empty()) throw UsageError("prepare: --text_column is empty");
  if (opt.shard_tokens < 1) throw UsageError("prepare: --shard_tokens must be at least 1");
  if (opt.chunk_bytes < 1) throw UsageError("prepare: chunk_bytes must be at least 1");
  if (opt.max_document_bytes < 1024) {
    throw UsageError("prepare: max_document_bytes must be at least 1024");
  }
  if (!opt.tokenizer.empty() && !fs::is_regular_file(opt.tokenizer)) {
    throw UsageError("prepare: --tokenizer " + opt.tokenizer + " is not a file");
  }
}

int thread_count(const PrepareOptions& opt) {
  return opt.num_threads > 0 ? opt.num_threads
                             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

DocumentReaderOptions reader_options(const PrepareOptions& opt) {
  DocumentReaderOptions r;
  r.text_column = opt.text_column;
  r.doc_separator = opt.doc_separator;
  r.max_document_bytes = opt.max_document_bytes;
  return r;
}

}  // namespace lmtrain::data::prepare_detail
