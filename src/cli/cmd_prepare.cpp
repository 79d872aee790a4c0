#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "data/prepare.h"

namespace lmtrain::cli {

int cmd_prepare(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"input", FlagKind::kMulti, "text files, directories (recursive) or .jsonl files", "PATH"},
      {"output", FlagKind::kValue, "output directory (tokenizer.json, train.bin, val.bin)", "DIR"},
      {"vocab_size", FlagKind::kValue,
       "tokenizer vocabulary incl. 256 bytes + <|endoftext|> "
       "(default 4096)",
       "N"},
      {"val_fraction", FlagKind::kValue, "share of documents held out for validation (0.05)", "F"},
      {"seed", FlagKind::kValue, "seed of the train/val split (1337)", "N"},
      {"doc_separator", FlagKind::kValue,
       "a line equal to this splits a text file into "
       "documents (e.g. % for fortune files)",
       "LINE"},
      {"threads", FlagKind::kValue, "encoding threads (0 = all cores)", "N"},
      {"tokenizer", FlagKind::kValue,
       "encode with this tokenizer.json (e.g. RUN/checkpoints/latest/tokenizer.json of an "
       "`lmtrain import hf`) instead of training one",
       "FILE"},
      quiet_flag(),
  };
  const auto args = parse_args("prepare", argv, flags, /*accept_config=*/false);
  if (args.help) {
    std::cout << "Usage: lmtrain prepare --input PATH... --output DIR [--vocab_size N]\n\n"
                 "Trains a byte-level BPE tokenizer on the training documents and writes\n"
                 "DIR/tokenizer.json (Hugging Face format), DIR/train.bin, DIR/val.bin (token\n"
                 "shards, one <|endoftext|> after each document) and DIR/prepare.json.\n"
                 "With --tokenizer FILE it encodes with that tokenizer instead (the data a\n"
                 "model that brings its own, e.g. an imported one, is fine-tuned on).\n\nFlags:\n"
              << flags_help(flags);
    return 0;
  }
  apply_quiet(args);
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' (inputs go after --input)");
  }
  if (!args.has("input")) throw UsageError("--input is required (text, directory or .jsonl)");
  if (!args.has("output")) throw UsageError("--output is required");
  data::PrepareOptions opts;
  opts.inputs = args.get_all("input");
  opts.output_dir = args.get("output");
  opts.vocab_size = args.get_int("vocab_size", 4096);
  opts.val_fraction = args.get_float("val_fraction", 0.05);
  opts.seed = static_cast<uint64_t>(args.get_int("seed", 1337));
  opts.doc_separator = args.get("doc_separator");
  opts.num_threads = static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag));
  opts.tokenizer = args.get("tokenizer");
  if (!opts.tokenizer.empty() && args.has("vocab_size")) {
    throw UsageError("--vocab_size and --tokenizer: a given tokenizer has its own vocabulary");
  }
  if (opts.vocab_size < 257 || opts.vocab_size > (int64_t{1} << 31)) {
    throw UsageError("--vocab_size must be in [257, 2^31], got " + std::to_string(opts.vocab_size));
  }
  if (!(opts.val_fraction > 0 && opts.val_fraction < 1)) {
    throw UsageError("--val_fraction must be in (0, 1), got " + args.get("val_fraction"));
  }
  const auto r = data::run_prepare(opts);
  std::cout << log::format(
      "prepared %s: %zu documents (%zu train, %zu val), %llu train tokens, "
      "%llu val tokens, vocab %zu\n",
      opts.output_dir.c_str(), r.num_documents, r.num_train_documents, r.num_val_documents,
      (unsigned long long)r.train_tokens, (unsigned long long)r.val_tokens, r.vocab_size);
  return 0;
}

}  // namespace lmtrain::cli
