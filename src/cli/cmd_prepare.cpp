#include <iostream>
#include <map>
#include <memory>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/chat/chat_prepare.h"
#include "data/prepare.h"

namespace lmtrain::cli {
namespace {

// --chat: conversations into masked shards (data/chat/chat_prepare.h).
int prepare_chat(const ParsedArgs& args) {
  for (const char* flag : {"vocab_size", "doc_separator", "text_column", "tokenizer_train_bytes",
                           "shard_tokens", "chat_tokens", "threads"}) {
    if (args.has(flag)) {
      throw UsageError(std::string("--") + flag +
                       " does not go with --chat (conversations are encoded with --tokenizer, "
                       "one per JSONL line)");
    }
  }
  data::chat::ChatPrepareOptions opts;
  opts.inputs = args.get_all("input");
  opts.output_dir = args.get("output");
  opts.tokenizer = args.get("tokenizer");
  opts.format = args.get("chat_format", "auto");
  opts.val_fraction = args.get_float("val_fraction", 0.05);
  opts.seed = static_cast<uint64_t>(args.get_int("seed", 1337));
  opts.max_line_bytes = static_cast<uint64_t>(
      args.get_int("max_document_bytes", int64_t{64} << 20, 1024, int64_t{1} << 40));
  opts.overwrite = args.get_bool("overwrite");
  const auto r = data::chat::run_chat_prepare(opts);
  std::cout << log::format(
      "prepared %s (%s): %lld train conversations (%lld tokens, %lld targets), %lld val "
      "conversations (%lld tokens, %lld targets), %lld without an assistant turn left out\n",
      opts.output_dir.c_str(), r.format.c_str(), (long long)r.train_conversations,
      (long long)r.train_tokens, (long long)r.train_targets, (long long)r.val_conversations,
      (long long)r.val_tokens, (long long)r.val_targets, (long long)r.skipped_without_targets);
  return 0;
}

}  // namespace

int cmd_prepare(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"input", FlagKind::kMulti,
       "text files, directories (recursive), .jsonl / .ndjson, .gz / .zst compressed text or "
       "JSONL, .parquet",
       "PATH"},
      {"output", FlagKind::kValue,
       "output directory (tokenizer.json, train_00000.bin ..., val_00000.bin ..., prepare.json)",
       "DIR"},
      {"vocab_size", FlagKind::kValue,
       "tokenizer vocabulary incl. 256 bytes + <|endoftext|> "
       "(default 4096)",
       "N"},
      {"val_fraction", FlagKind::kValue,
       "share of documents held out for validation, chosen by content hash; with too few "
       "documents for that, the last F of each document's bytes (0.05)",
       "F"},
      {"seed", FlagKind::kValue, "seed of the train/val split and the tokenizer sample (1337)",
       "N"},
      {"doc_separator", FlagKind::kValue,
       "a line equal to this splits a text file into "
       "documents (e.g. % for fortune files)",
       "LINE"},
      {"text_column", FlagKind::kValue, "the JSONL field / parquet column with the text (text)",
       "NAME"},
      {"threads", FlagKind::kValue, "encoding threads (0 = all cores)", "N"},
      {"tokenizer", FlagKind::kValue,
       "encode with this tokenizer.json (e.g. RUN/checkpoints/latest/tokenizer.json of an "
       "`lmtrain import hf`) instead of training one",
       "FILE"},
      quiet_flag(),
      {"tokenizer_train_bytes", FlagKind::kValue,
       "train BPE on a uniform sample of at most this many bytes of training text (100000000)",
       "N"},
      {"shard_tokens", FlagKind::kValue,
       "start a new train/val piece after this many training tokens (100000000)", "N"},
      {"max_document_bytes", FlagKind::kValue,
       "longest document: a longer text document is cut at a line boundary, a longer JSONL "
       "line is an error (67108864)",
       "N"},
      {"progress_seconds", FlagKind::kValue, "seconds between progress updates (1)", "S"},
      {"chat_tokens", FlagKind::kBool,
       "add nanochat's chat tokens (<|bos|>, <|user_start|>, ...) to the tokenizer it trains"},
      {"chat", FlagKind::kBool,
       "the inputs are conversations (JSONL of {\"messages\": [{role, content}, ...]}): write "
       "token shards with a loss mask for SFT (data.format: chat); needs --tokenizer"},
      {"chat_format", FlagKind::kValue,
       "--chat: auto (the tokenizer_config.json beside --tokenizer, else nanochat's tokens), "
       "nanochat, chatml, qwen2.5, qwen3 or llama3 (auto)",
       "NAME"},
      overwrite_flag(),
  };
  const auto args = parse_args("prepare", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain prepare --input PATH... --output DIR [--vocab_size N]\n\n"
          "Reads the documents of the inputs (text, JSONL, gzip / zstd compressed text or\n"
          "JSONL, parquet) as a stream, trains a byte-level BPE tokenizer on a sample of the\n"
          "training documents and encodes every document on all cores into DIR/tokenizer.json\n"
          "(Hugging Face format), DIR/train_00000.bin ... and DIR/val_00000.bin ... (token\n"
          "shards, one <|endoftext|> after each document; train reads them as one sequence)\n"
          "and DIR/prepare.json (every input file with its size and sha256). Memory stays\n"
          "bounded whatever the corpus size; the output is the same at any --threads.\n"
          "With --tokenizer FILE it encodes with that tokenizer instead (the data a\n"
          "model that brings its own, e.g. an imported one, is fine-tuned on).\n"
          "A prepare that was killed resumes from its last finished piece when run again\n"
          "with the same inputs and flags (the work in progress is in .DIR.partial).\n"
          "With --chat the inputs are conversations: DIR gets train.bin / val.bin and\n"
          "train_mask.bin / val_mask.bin (the assistant's tokens) in a chat format.\n\n")) {
    return 0;
  }
  apply_quiet(args);
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' (inputs go after --input)");
  }
  if (!args.has("input")) {
    throw UsageError("--input is required (text, directory, .jsonl, .gz, .zst or .parquet)");
  }
  if (!args.has("output")) throw UsageError("--output is required");
  if (args.get_bool("chat")) return prepare_chat(args);
  if (args.has("chat_format")) throw UsageError("--chat_format goes with --chat");
  data::PrepareOptions opts;
  opts.inputs = args.get_all("input");
  opts.output_dir = args.get("output");
  opts.vocab_size = args.get_int("vocab_size", 4096);
  opts.val_fraction = args.get_float("val_fraction", 0.05);
  opts.seed = static_cast<uint64_t>(args.get_int("seed", 1337));
  opts.doc_separator = args.get("doc_separator");
  opts.text_column = args.get("text_column", "text");
  opts.num_threads = static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag));
  opts.tokenizer = args.get("tokenizer");
  opts.tokenizer_train_bytes =
      static_cast<uint64_t>(args.get_int("tokenizer_train_bytes", 100'000'000, 1));
  opts.shard_tokens = static_cast<uint64_t>(args.get_int("shard_tokens", 100'000'000, 1));
  opts.max_document_bytes = static_cast<uint64_t>(
      args.get_int("max_document_bytes", int64_t{64} << 20, 1024, int64_t{1} << 40));
  opts.progress_seconds = args.get_float("progress_seconds", 1);
  // Each phase through the progress display (core/progress.h: redrawn on a terminal, plain
  // lines to a file or pipe, nothing with --quiet).
  struct PhaseDisplay {
    std::string phase;
    std::unique_ptr<core::Progress> progress;
  };
  auto display = std::make_shared<PhaseDisplay>();
  opts.progress = [display](const data::PrepareProgress& p) {
    static const std::map<std::string, std::string> names = {
        {"hash", "checksums"},
        {"sample", "sampling for the tokenizer"},
        {"count", "counting documents for the split"},
        {"encode", "encoding"}};
    if (!display->progress || display->phase != p.phase) {
      const auto name = names.count(p.phase) ? names.at(p.phase) : p.phase;
      display->phase = p.phase;
      display->progress = std::make_unique<core::Progress>(
          "prepare: " + name, static_cast<int64_t>(p.bytes_total), "bytes");
    }
    display->progress->set(static_cast<int64_t>(p.bytes_done));
    if (p.finished) display->progress.reset();  // its "done:" line
  };
  opts.overwrite = args.get_bool("overwrite");
  opts.chat_tokens = args.get_bool("chat_tokens");
  if (!opts.tokenizer.empty() && args.has("vocab_size")) {
    throw UsageError("--vocab_size and --tokenizer: a given tokenizer has its own vocabulary");
  }
  if (!opts.tokenizer.empty() && args.has("tokenizer_train_bytes")) {
    throw UsageError("--tokenizer_train_bytes and --tokenizer: a given tokenizer is not trained");
  }
  if (opts.vocab_size < 257 || opts.vocab_size > (int64_t{1} << 31)) {
    throw UsageError("--vocab_size must be in [257, 2^31], got " + std::to_string(opts.vocab_size));
  }
  if (!(opts.val_fraction > 0 && opts.val_fraction < 1)) {
    throw UsageError("--val_fraction must be in (0, 1), got " + args.get("val_fraction"));
  }
  if (!(opts.progress_seconds >= 0)) {
    throw UsageError("--progress_seconds must be >= 0, got " + args.get("progress_seconds"));
  }
  const auto r = data::run_prepare(opts);
  std::cout << log::format(
      "prepared %s: %zu documents (%zu train, %zu val), %llu train tokens, "
      "%llu val tokens, vocab %zu, %zu pieces%s\n",
      opts.output_dir.c_str(), r.num_documents, r.num_train_documents, r.num_val_documents,
      (unsigned long long)r.train_tokens, (unsigned long long)r.val_tokens, r.vocab_size,
      r.num_pieces,
      r.resumed ? log::format(" (resumed after %zu finished pieces)", r.resumed_pieces).c_str()
                : "");
  return 0;
}

}  // namespace lmtrain::cli
