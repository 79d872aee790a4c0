#include "data/prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/json_strict.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/token_shard.h"

namespace lmtrain::data {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read input file " + path.string());
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("error reading input file " + path.string());
  return s;
}

bool looks_binary(const std::string& content) {
  return content.find('\0', 0) < std::min<size_t>(content.size(), 8192);
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

constexpr size_t kMaxNamedSkips = 5;

bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl"; }

struct Corpus {
  std::vector<std::string> docs;
  uint64_t bytes = 0;
  size_t files = 0;
  std::vector<std::string> skipped;

  void add(std::string doc) {
    if (is_blank(doc)) return;  // empty documents carry nothing to learn
    bytes += doc.size();
    docs.push_back(std::move(doc));
  }
};

// Splits at lines equal to `sep` (a trailing '\r' is tolerated); separator lines are dropped.
void add_separated(const std::string& text, const std::string& sep, Corpus* corpus) {
  std::string doc;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + pos, end - pos);
    std::string_view bare = line;
    if (!bare.empty() && bare.back() == '\n') bare.remove_suffix(1);
    if (!bare.empty() && bare.back() == '\r') bare.remove_suffix(1);
    if (bare == sep) {
      corpus->add(std::move(doc));
      doc.clear();
    } else {
      doc.append(line);
    }
    pos = end;
  }
  corpus->add(std::move(doc));
}

void add_jsonl(const std::string& path, const std::string& text, Corpus* corpus) {
  size_t pos = 0;
  for (size_t lineno = 1; pos < text.size(); ++lineno) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    const auto j = core::parse_json_strict(line, where);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      throw Error(where + ": expected a JSON object with a \"text\" string");
    }
    corpus->add(j["text"].get<std::string>());
  }
}

void add_file(const fs::path& path, const PrepareOptions& opt, Corpus* corpus) {
  std::string text = read_file(path);
  if (looks_binary(text)) {
    // Name the first few; a directory of index files (fortune's *.dat) would flood the log.
    if (corpus->skipped.size() < kMaxNamedSkips) {
      log::warn("skipping binary file " + path.string() + " (NUL bytes in its first 8 KB)");
    }
    corpus->skipped.push_back(path.string());
    return;
  }
  ++corpus->files;
  if (is_jsonl(path)) {
    add_jsonl(path.string(), text, corpus);
  } else if (!opt.doc_separator.empty()) {
    add_separated(text, opt.doc_separator, corpus);
  } else {
    corpus->add(std::move(text));
  }
}

// All input files in order: each input as given; directories expanded recursively in sorted
// order. A file reached twice (e.g. through a symlink) is read once.
std::vector<fs::path> list_files(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  std::set<fs::path> seen;
  auto take = [&](const fs::path& p) {
    std::error_code ec;
    fs::path canon = fs::canonical(p, ec);
    if (ec) throw Error("cannot resolve input " + p.string() + ": " + ec.message());
    if (seen.insert(canon).second) files.push_back(p);
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) throw UsageError("input path does not exist: " + input);
    if (!fs::is_directory(st)) {
      take(input);
      continue;
    }
    std::vector<fs::path> found;
    fs::recursive_directory_iterator it(input, ec), end;
    if (ec) throw Error("cannot read input directory " + input + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw Error("cannot read input directory " + input + ": " + ec.message());
      if (fs::is_regular_file(it->path())) found.push_back(it->path());  // follows symlinks
    }
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found) take(p);
  }
  return files;
}

// Encodes docs[order[i]] for i in [0, n) + <|endoftext|> each, in order, into `writer`.
// Batches of documents are encoded on several threads and written in order.
void encode_split(const BpeTokenizer& tok, const std::vector<std::string>& docs,
                  const std::vector<size_t>& order, int threads, ShardWriter* writer,
                  core::Progress& progress) {
  const uint32_t eot = tok.eot_id();
  constexpr size_t kBatchBytes = 64 << 20;  // bounds memory for large corpora
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i, bytes = 0;
    while (j < order.size() && (j == i || bytes < kBatchBytes)) bytes += docs[order[j++]].size();
    // Contiguous ranges of roughly equal bytes, one per thread.
    const size_t nt = std::max<size_t>(1, std::min<size_t>(threads, j - i));
    std::vector<std::vector<uint32_t>> out(nt);
    std::vector<size_t> bounds{i};
    size_t acc = 0;
    for (size_t k = i; k < j && bounds.size() < nt; ++k) {
      acc += docs[order[k]].size();
      if (acc * nt >= bytes * bounds.size()) bounds.push_back(k + 1);
    }
    while (bounds.size() <= nt) bounds.push_back(j);
    auto work = [&](size_t t) {
      for (size_t k = bounds[t]; k < bounds[t + 1]; ++k) {
        tok.encode_append(docs[order[k]], &out[t]);
        out[t].push_back(eot);
      }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < nt; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    for (const auto& ids : out) writer->append(ids);
    progress.add(static_cast<int64_t>(bytes));
    i = j;
  }
}

void validate(const PrepareOptions& opt) {
  if (opt.inputs.empty()) throw UsageError("prepare: no input files given");
  if (opt.output_dir.empty()) throw UsageError("prepare: no output directory given");
  if (opt.tokenizer.empty() && opt.vocab_size < 257) {
    throw UsageError("prepare: vocab_size must be at least 257 (256 bytes + <|endoftext|>), got " +
                     std::to_string(opt.vocab_size));
  }
  if (!(opt.val_fraction > 0 && opt.val_fraction < 1)) {
    throw UsageError(
        log::format("prepare: val_fraction must be between 0 and 1, got %g", opt.val_fraction));
  }
}

}  // namespace

PrepareResult run_prepare(const PrepareOptions& opt) {
  validate(opt);
  PrepareResult res;

  // 1. Read documents.
  Corpus corpus;
  {
    const auto files = list_files(opt.inputs);
    core::Progress reading("prepare: reading", static_cast<int64_t>(files.size()), "files");
    for (const fs::path& f : files) {
      add_file(f, opt, &corpus);
      reading.add(1);
    }
  }
  const size_t n = corpus.docs.size();
  if (corpus.skipped.size() > kMaxNamedSkips) {
    log::warn(log::format("... skipped %zu more binary files (listed in prepare.json)",
                          corpus.skipped.size() - kMaxNamedSkips));
  }
  log::info(log::format("read %zu documents (%.2f MB) from %zu files, skipped %zu binary files", n,
                        corpus.bytes / 1e6, corpus.files, corpus.skipped.size()));
  if (n < 2) {
    throw UsageError("prepare: need at least 2 non-empty documents (train and val), found " +
                     std::to_string(n));
  }

  // 2. Deterministic split. Fisher-Yates with mt19937_64 (whose output the standard fixes),
  // not std::shuffle (whose algorithm varies between standard libraries).
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(opt.seed);
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  const size_t n_val = std::clamp<size_t>(
      static_cast<size_t>(std::llround(opt.val_fraction * static_cast<double>(n))), 1, n - 1);
  std::vector<size_t> val_order(order.begin(), order.begin() + n_val);
  std::vector<size_t> train_order(order.begin() + n_val, order.end());

  // 3. Tokenizer from the training documents only, so validation text stays unseen; or the
  // one given (a model's own, so that its token ids mean what they meant in pretraining).
  auto t0 = Clock::now();
  uint64_t train_bytes = 0;
  for (size_t i : train_order) train_bytes += corpus.docs[i].size();
  auto make_tokenizer = [&]() {
    if (!opt.tokenizer.empty()) {
      if (!fs::is_regular_file(opt.tokenizer)) {
        throw UsageError("prepare: --tokenizer " + opt.tokenizer + " is not a file");
      }
      auto given = BpeTokenizer::load(opt.tokenizer);
      log::info(log::format("tokenizer %s: vocab %zu, %zu merges", opt.tokenizer.c_str(),
                            given.vocab_size(), given.merges().size()));
      return given;
    }
    BpeTrainerOptions topt;
    topt.vocab_size = static_cast<size_t>(opt.vocab_size);
    BpeTrainer trainer(topt);
    for (size_t i : train_order) trainer.add_document(corpus.docs[i]);
    // vocab_size - 257 merges: 256 byte tokens and <|endoftext|> are there from the start.
    core::Progress training("prepare: training the tokenizer", opt.vocab_size - 257, "merges");
    trainer.set_progress(&training);
    auto trained = trainer.train();
    training.finish();
    log::info(log::format("trained BPE tokenizer: vocab %zu, %zu merges, %zu unique words, %.2f s",
                          trained.vocab_size(), trained.merges().size(), trainer.num_unique_words(),
                          seconds_since(t0)));
    return trained;
  };
  const BpeTokenizer tok = make_tokenizer();
  res.train_seconds = seconds_since(t0);

  // 4. Encode and write.
  std::error_code ec;
  fs::create_directories(opt.output_dir, ec);
  if (ec) throw Error("cannot create output directory " + opt.output_dir + ": " + ec.message());
  const fs::path out(opt.output_dir);
  res.tokenizer_path = (out / "tokenizer.json").string();
  res.train_path = (out / "train.bin").string();
  res.val_path = (out / "val.bin").string();
  res.summary_path = (out / "prepare.json").string();
  // A given tokenizer.json is copied as is (what its model was trained with), so checkpoints
  // that carry the same file hash equal; anything else is written in HF form.
  bool copied = false;
  if (!opt.tokenizer.empty()) {
    fs::copy_file(opt.tokenizer, res.tokenizer_path, fs::copy_options::overwrite_existing, ec);
    try {
      copied = !ec && BpeTokenizer::load_hf(res.tokenizer_path).hash() == tok.hash();
    } catch (const Error&) {
      copied = false;
    }
  }
  if (!copied) tok.save_hf(res.tokenizer_path);

  const int threads = opt.num_threads > 0
                          ? opt.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int dtype = shard_dtype_for_vocab(tok.vocab_size());
  t0 = Clock::now();
  {
    core::Progress encoding("prepare: encoding", static_cast<int64_t>(corpus.bytes), "bytes");
    ShardWriter train(res.train_path, dtype, tok.hash());
    encode_split(tok, corpus.docs, train_order, threads, &train, encoding);
    res.train_tokens = train.num_tokens();
    train.finish();
    ShardWriter val(res.val_path, dtype, tok.hash());
    encode_split(tok, corpus.docs, val_order, threads, &val, encoding);
    res.val_tokens = val.num_tokens();
    val.finish();
  }
  res.encode_seconds = seconds_since(t0);
  const uint64_t text_tokens = res.train_tokens + res.val_tokens - n;
  log::info(
      log::format("encoded %.2f MB in %.2f s (%.2f MB/s): train %llu tokens (%zu docs), "
                  "val %llu tokens (%zu docs), %.2f bytes/token",
                  corpus.bytes / 1e6, res.encode_seconds,
                  corpus.bytes / 1e6 / std::max(res.encode_seconds, 1e-9),
                  static_cast<unsigned long long>(res.train_tokens), train_order.size(),
                  static_cast<unsigned long long>(res.val_tokens), val_order.size(),
                  text_tokens ? static_cast<double>(corpus.bytes) / text_tokens : 0.0));

  res.num_files = corpus.files;
  res.skipped_files = corpus.skipped;
  res.num_documents = n;
  res.num_train_documents = train_order.size();
  res.num_val_documents = val_order.size();
  res.num_bytes = corpus.bytes;
  res.vocab_size = tok.vocab_size();
  res.tokenizer_hash = tok.hash();

  nlohmann::ordered_json s;
  s["inputs"] = opt.inputs;
  s["files"] = res.num_files;
  s["skipped_files"] = res.skipped_files;
  s["doc_separator"] = opt.doc_separator;
  if (!opt.tokenizer.empty()) s["tokenizer"] = opt.tokenizer;
  s["documents"] = {{"total", n}, {"train", train_order.size()}, {"val", val_order.size()}};
  s["bytes"] = {{"total", corpus.bytes}, {"train", train_bytes}};
  s["tokens"] = {{"train", res.train_tokens}, {"val", res.val_tokens}};
  s["bytes_per_token"] = text_tokens ? static_cast<double>(corpus.bytes) / text_tokens : 0.0;
  s["vocab_size"] = res.vocab_size;
  s["eot_id"] = tok.eot_id();
  s["dtype_bytes"] = dtype;
  s["tokenizer_hash"] = res.tokenizer_hash;
  s["val_fraction"] = opt.val_fraction;
  s["seed"] = opt.seed;
  s["train_seconds"] = res.train_seconds;
  s["encode_seconds"] = res.encode_seconds;
  {
    std::ofstream f(res.summary_path, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("cannot write " + res.summary_path);
    f << s.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
    if (!f.flush()) throw Error("error writing " + res.summary_path);
  }
  log::info("wrote " + res.tokenizer_path + ", " + res.train_path + ", " + res.val_path);
  return res;
}

}  // namespace lmtrain::data
