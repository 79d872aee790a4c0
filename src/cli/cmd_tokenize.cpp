// `lmtrain tokenize`: a file's bytes -> token ids (or ids -> bytes with --decode), with the
// tokenizer lmtrain uses for prepare / generate. For checking ids against other tokenizers
// (Hugging Face `tokenizers`) and for inspecting how a text is split.
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/parse_int.h"
#include "data/bpe_tokenizer.h"

namespace lmtrain::cli {
namespace {

std::string read_input(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  return core::read_file(path);
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

}  // namespace

int cmd_tokenize(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"tokenizer", FlagKind::kValue,
       "tokenizer.json, or a directory with tokenizer.json or encoder.json + vocab.bpe", "PATH"},
      {"input", FlagKind::kValue, "file to encode (- = stdin)", "FILE"},
      {"output", FlagKind::kValue, "where the ids (or, with --decode, bytes) go (default stdout)",
       "FILE"},
      {"no_special", FlagKind::kBool, "encode special-token text as plain bytes"},
      {"decode", FlagKind::kBool, "input holds ids separated by whitespace: write their bytes"},
  };
  const auto args = parse_args("tokenize", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain tokenize --tokenizer PATH --input FILE [--output FILE]\n\n"
          "Encodes the bytes of FILE (any bytes: invalid UTF-8 is encoded losslessly as\n"
          "byte tokens) and writes the token ids separated by spaces, one line. As in\n"
          "Hugging Face `tokenizers`, the text of a special token (<|endoftext|>) becomes\n"
          "its id unless --no_special; no token is added. --decode does the reverse.\n\n")) {
    return 0;
  }
  if (!args.positional.empty())
    throw UsageError("unexpected argument '" + args.positional[0] + "'");
  if (!args.has("tokenizer")) throw UsageError("--tokenizer is required");
  if (!args.has("input")) throw UsageError("--input is required (a file, or - for stdin)");
  const auto tok = data::BpeTokenizer::load(args.get("tokenizer"));
  const std::string input = read_input(args.get("input"));
  std::string out;
  if (args.get_bool("decode")) {
    out = tok.decode(parse_ids(input, args.get("input")));
  } else {
    const auto ids =
        args.get_bool("no_special") ? tok.encode(input) : tok.encode_with_special(input);
    std::ostringstream s;
    for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
    s << "\n";
    out = s.str();
  }
  if (args.has("output")) {
    core::write_file_atomic(args.get("output"), out);
  } else {
    std::cout << out << std::flush;
  }
  return 0;
}

}  // namespace lmtrain::cli
