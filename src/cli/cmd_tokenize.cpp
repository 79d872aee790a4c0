// `lmtrain tokenize`: a file's bytes -> token ids (or ids -> bytes with --decode), with the
// tokenizer lmtrain uses for prepare / generate. For checking ids against other tokenizers
// (Hugging Face `tokenizers`, tiktoken), for inspecting how a text is split, and, with
// --documents / --train_vocab_size and --timing, for measuring encoding and BPE training alone
// (bench/tokenizer_compare.sh).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/parse_int.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"

namespace lmtrain::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string read_input(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  return core::read_file(path);
}

// Every document of `path` (a file or a directory), read as `lmtrain prepare` reads its inputs;
// with keep_blank the blank ones too, so that output line N is document N.
std::vector<std::string> read_documents(const std::string& path, const ParsedArgs& args,
                                        bool keep_blank) {
  data::DocumentReaderOptions options;
  options.keep_blank = keep_blank;
  options.doc_separator = args.get("doc_separator");
  if (args.has("text_column")) options.text_column = args.get("text_column");
  std::vector<std::string> docs;
  for (const data::InputFile& file : data::list_input_files({path})) {
    auto reader = data::open_document_reader(file, options);
    std::string text;
    while (reader->next(&text)) docs.push_back(std::move(text));
  }
  return docs;
}

std::vector<uint32_t> parse_ids(const std::string& text, const std::string& path) {
  std::vector<uint32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const auto v = core::parse_nonnegative_int(word, UINT32_MAX);
    if (!v) throw UsageError(path + ": '" + word + "' is not a token id");
    ids.push_back(static_cast<uint32_t>(*v));
  }
  return ids;
}

void append_ids(const std::vector<uint32_t>& ids, std::string* out) {
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    const int n = snprintf(buf, sizeof(buf), i ? " %u" : "%u", ids[i]);
    out->append(buf, static_cast<size_t>(n));
  }
  out->push_back('\n');
}

// The --timing line (stderr): the work alone, without reading the input or writing the output.
// `key: value` fields, as bench/common.sh's `field` reads them.
void report_timing(const char* what, double seconds, uint64_t bytes, uint64_t docs, uint64_t tokens,
                   int threads) {
  const double s = std::max(seconds, 1e-9);
  std::string line = log::format("tokenize: %s seconds: %.3f MB_per_s: %.2f bytes: %llu", what,
                                 seconds, bytes / 1e6 / s, static_cast<unsigned long long>(bytes));
  line +=
      log::format(" documents: %llu threads: %d", static_cast<unsigned long long>(docs), threads);
  if (tokens) {
    line += log::format(" tokens: %llu tokens_per_s: %.0f", static_cast<unsigned long long>(tokens),
                        tokens / s);
  }
  std::cerr << line << "\n" << std::flush;
}

// Each document on its own (merges never cross documents), spread over `threads`: the ids do
// not depend on the thread count.
std::vector<std::vector<uint32_t>> encode_documents(const data::BpeTokenizer& tok,
                                                    const std::vector<std::string>& docs,
                                                    bool special, int threads) {
  std::vector<std::vector<uint32_t>> ids(docs.size());
  auto encode_one = [&](size_t i) {
    if (special) {
      ids[i] = tok.encode_with_special(docs[i]);
    } else {
      ids[i] = tok.encode(docs[i]);
    }
  };
  if (threads <= 1) {
    for (size_t i = 0; i < docs.size(); ++i) encode_one(i);
    return ids;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < docs.size();) encode_one(i);
    });
  }
  for (auto& th : pool) th.join();
  return ids;
}

}  // namespace

int cmd_tokenize(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"tokenizer", FlagKind::kValue,
       "tokenizer.json, or a directory with tokenizer.json or encoder.json + vocab.bpe", "PATH"},
      {"input", FlagKind::kValue,
       "file to encode (- = stdin); with --documents or --train_vocab_size a corpus file or "
       "directory",
       "PATH"},
      {"output", FlagKind::kValue,
       "where the ids (with --decode the bytes, with --train_vocab_size the tokenizer.json) go "
       "(default stdout); replaced if it exists",
       "FILE"},
      {"no_special", FlagKind::kBool, "encode special-token text as plain bytes"},
      {"decode", FlagKind::kBool, "input holds ids separated by whitespace: write their bytes"},
      {"documents", FlagKind::kBool,
       "read --input as `lmtrain prepare` reads a corpus (JSONL, parquet, .gz/.zst, text split "
       "at --doc_separator lines) and encode each document on its own: one line of ids each"},
      {"doc_separator", FlagKind::kValue,
       "with --documents / --train_vocab_size: a line equal to this splits a text file", "LINE"},
      {"text_column", FlagKind::kValue,
       "with --documents / --train_vocab_size: the JSONL field / parquet column (text)", "NAME"},
      {"threads", FlagKind::kValue, "with --documents: encoding threads (0 = all cores; 1)", "N"},
      {"train_vocab_size", FlagKind::kValue,
       "instead of encoding, train a BPE tokenizer of N tokens on the documents of --input "
       "(prepare's trainer: GPT-2 pre-tokenizer, ids 0-255 the bytes, <|endoftext|> last) and "
       "write its tokenizer.json to --output",
       "N"},
      {"timing", FlagKind::kBool,
       "print one line on stderr: seconds, MB/s and tokens/s of the encoding (or training) "
       "alone, without reading the input or writing the output"},
  };
  const auto args = parse_args("tokenize", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain tokenize --tokenizer PATH --input FILE [--output FILE]\n"
          "       lmtrain tokenize --tokenizer PATH --input CORPUS --documents [--threads N] "
          "[--timing]\n"
          "       lmtrain tokenize --train_vocab_size N --input CORPUS --output tokenizer.json "
          "[--timing]\n\n"
          "Encodes the bytes of FILE (any bytes: invalid UTF-8 is encoded losslessly as\n"
          "byte tokens) and writes the token ids separated by spaces, one line. As in\n"
          "Hugging Face `tokenizers`, the text of a special token (<|endoftext|>) becomes\n"
          "its id unless --no_special; no token is added. --decode does the reverse.\n"
          "--documents encodes each document of a corpus on its own (one line of ids per\n"
          "document, an empty line for an empty one: line N is document N), on --threads\n"
          "threads. --train_vocab_size trains a tokenizer as `lmtrain prepare` does, on\n"
          "every document of CORPUS. --timing reports the speed of the work alone on\n"
          "stderr (bench/tokenizer_compare.sh).\n\n")) {
    return 0;
  }
  if (!args.positional.empty())
    throw UsageError("unexpected argument '" + args.positional[0] + "'");
  if (!args.has("input")) throw UsageError("--input is required (a file, or - for stdin)");
  const bool timing = args.get_bool("timing");
  const bool documents = args.get_bool("documents");
  const bool train = args.has("train_vocab_size");
  const std::string input = args.get("input");
  if (train || documents) {
    if (args.has("decode")) throw UsageError("--decode does not go with --documents");
    if (input == "-") throw UsageError("--input - (stdin) does not go with --documents");
  } else {
    for (const char* f : {"doc_separator", "text_column", "threads"}) {
      if (args.has(f))
        throw UsageError(std::string("--") + f + " needs --documents or --train_vocab_size");
    }
  }

  if (train) {
    if (args.has("tokenizer"))
      throw UsageError("--train_vocab_size trains a tokenizer: drop --tokenizer");
    if (!args.has("output")) throw UsageError("--train_vocab_size needs --output tokenizer.json");
    if (args.has("threads")) {
      throw UsageError("--threads goes with --documents: BPE training runs on one thread");
    }
    data::BpeTrainerOptions topt;
    topt.vocab_size = static_cast<size_t>(args.get_int("train_vocab_size", 0, 257, 1 << 24));
    const auto docs = read_documents(input, args, /*keep_blank=*/false);
    uint64_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();
    const auto t0 = Clock::now();
    data::BpeTrainer trainer(topt);
    for (const auto& d : docs) trainer.add_document(d);
    const double count_seconds = seconds_since(t0);
    const auto t1 = Clock::now();
    const auto tok = trainer.train();
    const double merge_seconds = seconds_since(t1);
    if (timing) {
      report_timing("train", count_seconds + merge_seconds, bytes, docs.size(), 0, 1);
      std::cerr << log::format(
                       "tokenize: train count_seconds: %.3f merge_seconds: %.3f vocab: %zu "
                       "merges: %zu unique_words: %zu",
                       count_seconds, merge_seconds, tok.vocab_size(), tok.merges().size(),
                       trainer.num_unique_words())
                << "\n";
    }
    tok.save_hf(args.get("output"));
    return 0;
  }

  if (!args.has("tokenizer")) throw UsageError("--tokenizer is required");
  const auto tok = data::BpeTokenizer::load(args.get("tokenizer"));
  const bool special = !args.get_bool("no_special");
  std::string out;
  if (documents) {
    int threads = static_cast<int>(args.get_int("threads", 1, 0, kMaxThreadsFlag));
    if (threads == 0) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    const auto docs = read_documents(input, args, /*keep_blank=*/true);
    uint64_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();
    const auto t0 = Clock::now();
    const auto ids = encode_documents(tok, docs, special, threads);
    const double seconds = seconds_since(t0);
    uint64_t tokens = 0;
    for (const auto& v : ids) tokens += v.size();
    if (timing) report_timing("encode", seconds, bytes, docs.size(), tokens, threads);
    out.reserve(tokens * 6);
    for (const auto& v : ids) append_ids(v, &out);
  } else {
    const std::string text = read_input(input);
    if (args.get_bool("decode")) {
      out = tok.decode(parse_ids(text, input));
    } else {
      const auto t0 = Clock::now();
      const auto ids = special ? tok.encode_with_special(text) : tok.encode(text);
      if (timing) report_timing("encode", seconds_since(t0), text.size(), 1, ids.size(), 1);
      append_ids(ids, &out);
    }
  }
  if (args.has("output")) {
    core::write_file_atomic(args.get("output"), out);
  } else {
    std::cout << out << std::flush;
  }
  return 0;
}

}  // namespace lmtrain::cli
