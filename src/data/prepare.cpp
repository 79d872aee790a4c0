#include "data/prepare.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <thread>

#include "core/error.h"
#include "core/fault_injection.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/output_dir.h"
#include "core/sha256.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/chat/chat_format.h"
#include "data/chat/chat_render.h"
#include "data/corpus/corpus_reader.h"
#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"
#include "data/document_hash.h"
#include "data/position_split.h"
#include "data/prepare_journal.h"
#include "data/token_shard.h"
#include "data/token_split.h"

namespace lmtrain::data {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr size_t kMaxNamedSkips = 5;

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

// ---- stage 1: every input's sha256, and which text files are binary (skipped)

nlohmann::json hash_inputs(const std::vector<InputFile>& files, const PrepareOptions& opt) {
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  ProgressMeter meter(opt.progress, "hash", total, opt.progress_seconds);
  std::mutex mu;
  uint64_t done = 0;
  std::vector<std::string> sha(files.size());
  std::vector<char> binary(files.size(), 0);
  std::atomic<size_t> next{0};
  auto work = [&]() {
    std::vector<char> buf(4 << 20);
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      const InputFile& f = files[i];
      std::FILE* in = std::fopen(f.path.c_str(), "rb");
      if (!in) throw Error("cannot open input file " + f.path + ": " + std::strerror(errno));
      core::Sha256 h;
      size_t got;
      while ((got = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
        h.update(buf.data(), got);
        std::lock_guard<std::mutex> lock(mu);
        done += got;
        meter.update(done, 0);
      }
      const bool failed = std::ferror(in);
      std::fclose(in);
      if (failed) throw Error("error reading input file " + f.path);
      sha[i] = h.hex_digest();
      binary[i] = is_binary_text_file(f);
    }
  };
  const int nt = std::min<int>(thread_count(opt), std::max<size_t>(1, files.size()));
  std::vector<std::future<void>> pool;
  for (int t = 0; t < nt; ++t) pool.push_back(std::async(std::launch::async, work));
  for (auto& p : pool) p.get();
  meter.finish(total, 0);

  nlohmann::json hashes = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    hashes.push_back(sha[i]);
    if (binary[i]) skipped.push_back(i);
  }
  return {{"hashes", hashes}, {"skipped", skipped}};
}

// ---- stage 2: the tokenizer

struct SampleStats {
  uint64_t documents = 0, bytes = 0;
  // Documents as read (a long text document in pieces), those with validation text, and the
  // documents themselves (pieces joined).
  uint64_t corpus_documents = 0, corpus_val_documents = 0, whole_documents = 0;
  PiecedDocumentSizes pieced;  // the sizes of the documents read in pieces
};

// The training documents with the smallest sample keys that fit in `budget` bytes, read in one
// pass with at most `budget` bytes of them held; and how many documents go to validation. By
// position (`by_position`: the sizes of the documents read in pieces), every document's
// training part is a candidate; else the content hash decides. A budget of 0 only counts.
std::vector<std::string> sample_for_tokenizer(const std::vector<InputFile>& files,
                                              const PrepareOptions& opt,
                                              const PiecedDocumentSizes* by_position,
                                              const char* phase, SampleStats* stats,
                                              size_t* peak_reader_bytes) {
  struct Candidate {
    uint64_t key, seq;
    std::string text;
    bool operator<(const Candidate& o) const { return key != o.key ? key < o.key : seq < o.seq; }
  };
  std::priority_queue<Candidate> heap;  // the largest key on top: the first to drop
  uint64_t held = 0, seq = 0;
  const uint64_t budget = opt.tokenizer_train_bytes;
  CorpusReader reader(files, reader_options(opt));
  ProgressMeter meter(opt.progress, phase, reader.bytes_total(), opt.progress_seconds);
  std::string text;
  while (!reader.at_end()) {
    if (!reader.next_in_file(&text)) continue;
    ++stats->corpus_documents;
    const PieceOfDocument piece = reader.piece();
    if (!piece.continues) ++stats->whole_documents;
    if (!piece.whole()) stats->pieced[piece.first] = piece.offset + text.size();
    const uint64_t h = document_hash(text);
    if (by_position) {
      const size_t cut = position_split_cut(text, piece, *by_position, opt.val_fraction);
      if (cut < text.size()) ++stats->corpus_val_documents;
      text.resize(cut);
    }
    if (!by_position && is_val_document(h, opt.seed, opt.val_fraction)) {
      ++stats->corpus_val_documents;
    } else if (text.size() <= budget) {
      const uint64_t key = sample_key(h, opt.seed);
      const Candidate probe{key, seq, {}};
      // Once full, a document whose key is above every held one would be the first dropped.
      if (!(held + text.size() > budget && !heap.empty() && heap.top() < probe)) {
        held += text.size();
        heap.push(Candidate{key, seq, std::move(text)});
        text = std::string();
        while (held > budget) {
          held -= heap.top().text.size();
          heap.pop();
        }
      }
    }
    ++seq;
    meter.update(reader.bytes_done(), stats->corpus_documents);
  }
  meter.finish(reader.bytes_total(), stats->corpus_documents);
  *peak_reader_bytes = std::max(*peak_reader_bytes, reader.peak_buffer_bytes());
  std::vector<std::string> docs;
  while (!heap.empty()) {
    docs.push_back(std::move(const_cast<Candidate&>(heap.top()).text));
    heap.pop();
  }
  stats->documents = docs.size();
  stats->bytes = held;
  return docs;
}

// The content-hash split needs a document on each side; fewer documents than that (one book,
// a few files) are split by position within each document instead. One document read in pieces
// is still one document.
bool hash_split_works(const SampleStats& s) {
  return s.whole_documents >= 2 && s.corpus_val_documents > 0 &&
         s.corpus_val_documents < s.corpus_documents;
}

// The options of the pass that samples the tokenizer's training text; with a given tokenizer
// nothing is sampled (budget 0), the pass only counts the split.
PrepareOptions counting_or_sampling(const PrepareOptions& opt) {
  PrepareOptions o = opt;
  if (!opt.tokenizer.empty()) o.tokenizer_train_bytes = 0;
  return o;
}

// `documents` of the corpus; the parts of them that went to training and to validation.
void check_counts(uint64_t documents, uint64_t train_parts, uint64_t val_parts, bool by_position,
                  const PrepareOptions& opt) {
  if (documents == 0) throw UsageError("prepare: the inputs hold no non-empty document");
  if (by_position) {
    if (val_parts == 0) {
      throw UsageError(log::format(
          "prepare: %llu documents are too few for the content-hash split, and none has a line "
          "boundary to cut its last %g of bytes off at for validation: give more documents, or "
          "text with line breaks",
          static_cast<unsigned long long>(documents), opt.val_fraction));
    }
    return;
  }
  if (documents < 2) {
    throw UsageError("prepare: need at least 2 non-empty documents (train and val), found " +
                     std::to_string(documents));
  }
  if (val_parts == 0 || train_parts == 0) {
    throw UsageError(log::format(
        "prepare: no document fell into the %s split (%llu documents, val_fraction %g; the "
        "split goes by each document's hash): %s --val_fraction, or give more documents",
        val_parts == 0 ? "validation" : "training", static_cast<unsigned long long>(documents),
        opt.val_fraction, val_parts == 0 ? "raise" : "lower"));
  }
}

// ---- stage 3: encoding

// A chunk's documents encoded, in order, as parts: part i is ids[ends[i-1], ends[i]) (with its
// <|endoftext|>), of the chunk's document doc[i], in the validation split when val[i]. By hash a
// document is one part; by position its training part and its validation part (either may be
// empty, and is then left out).
struct EncodedChunk {
  CorpusPosition start;  // the chunk's: document j ends at (start.file, start.document + j + 1)
  std::vector<uint32_t> ids;
  std::vector<size_t> ends;
  std::vector<uint8_t> val;
  std::vector<uint64_t> bytes;
  std::vector<size_t> doc;
  std::vector<uint8_t> last_piece;  // per document: it ends the document it is a piece of
};

EncodedChunk encode_chunk(const BpeTokenizer& tok, const DocumentChunk& chunk, uint64_t seed,
                          double val_fraction, const PiecedDocumentSizes* by_position) {
  EncodedChunk out;
  out.start = chunk.start;
  // Text encodes to about a token per 4 bytes: room for a token per 3 spares a 64 MiB piece
  // of one long document the vector's doubling (twice its ids, and a copy) in most cases.
  out.ids.reserve(chunk.bytes / 3 + 2 * chunk.documents.size());
  for (const PieceOfDocument& p : chunk.pieces) out.last_piece.push_back(!p.continues);
  const uint32_t eot = tok.eot_id();
  auto add_part = [&](std::string_view text, bool val, size_t doc) {
    tok.encode_append(text, &out.ids);
    out.ids.push_back(eot);
    out.ends.push_back(out.ids.size());
    out.val.push_back(val);
    out.bytes.push_back(text.size());
    out.doc.push_back(doc);
  };
  for (size_t j = 0; j < chunk.documents.size(); ++j) {
    const std::string& d = chunk.documents[j];
    if (!by_position) {
      add_part(d, is_val_document(document_hash(d), seed, val_fraction), j);
      continue;
    }
    const size_t cut = position_split_cut(d, chunk.pieces[j], *by_position, val_fraction);
    if (cut > 0) add_part(std::string_view(d).substr(0, cut), false, j);
    if (cut < d.size()) add_part(std::string_view(d).substr(cut), true, j);
  }
  return out;
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

struct Encoder {
  Encoder(const PrepareOptions& o, const BpeTokenizer& t, const std::string& s, PrepareJournal& j,
          std::vector<PieceRecord>& r)
      : opt(o), tok(t), stage(s), journal(j), records(r) {}
  const PrepareOptions& opt;
  const BpeTokenizer& tok;
  const std::string& stage;
  PrepareJournal& journal;
  std::vector<PieceRecord>& records;
  int dtype = 2;

  PieceRecord totals;  // running totals (of the last finished piece, then of chunks written)
  std::unique_ptr<ShardWriter> train, val;

  // Appends the chunk's documents to the open piece (opening one when none is), and closes
  // the piece after the first document that fills it: pieces are cut between documents by
  // token count alone, so they do not depend on how the corpus was cut into chunks.
  void write(const EncodedChunk& c) {
    size_t begin = 0;
    for (size_t i = 0; i < c.ends.size(); ++i) {
      const bool document_ends = i + 1 == c.ends.size() || c.doc[i + 1] != c.doc[i];
      if (!train) open_piece();
      const size_t n = c.ends[i] - begin;
      if (c.val[i]) {
        val->append(c.ids.data() + begin, n);
        totals.val_tokens += n;
        totals.val_documents += 1;
        totals.val_bytes += c.bytes[i];
      } else {
        train->append(c.ids.data() + begin, n);
        totals.train_tokens += n;
        totals.train_documents += 1;
        totals.train_bytes += c.bytes[i];
      }
      begin = c.ends[i];
      if (!document_ends) continue;
      totals.documents += c.last_piece[c.doc[i]];
      if (train->num_tokens() >= opt.shard_tokens) {
        close_piece({c.start.file, c.start.document + c.doc[i] + 1});
      }
    }
  }

  void open_piece() {
    const size_t k = records.size();
    train = std::make_unique<ShardWriter>(stage + "/" + split_piece_name("train", k), dtype,
                                          tok.hash());
    val =
        std::make_unique<ShardWriter>(stage + "/" + split_piece_name("val", k), dtype, tok.hash());
  }

  // Finishes the open piece: both files in place and durable, then the journal line.
  void close_piece(const CorpusPosition& next) {
    if (!train) return;
    const size_t k = records.size();
    PieceRecord r = totals;
    r.index = k;
    r.next = next;
    r.piece_train_tokens = train->num_tokens();
    r.piece_val_tokens = val->num_tokens();
    train->finish();
    val->finish();
    train.reset();
    val.reset();
    core::fsync_path(stage + "/" + split_piece_name("train", k));
    core::fsync_path(stage + "/" + split_piece_name("val", k));
    core::fsync_path(stage);
    journal.append(r.to_json());
    records.push_back(r);
    // Test hook: LMTRAIN_FAULT_KILL=0:K kills the process once K pieces are finished.
    core::maybe_inject_fault(0, static_cast<int64_t>(records.size()));
  }
};

void encode_corpus(const std::vector<InputFile>& files, const PrepareOptions& opt,
                   const PiecedDocumentSizes* by_position, const BpeTokenizer& tok,
                   const std::string& stage, PrepareJournal& journal,
                   std::vector<PieceRecord>& records, size_t* peak_reader_bytes) {
  Encoder enc(opt, tok, stage, journal, records);
  enc.dtype = shard_dtype_for_vocab(tok.vocab_size());
  CorpusPosition start;
  if (!records.empty()) {
    enc.totals = records.back();
    start = records.back().next;
  }
  CorpusReader reader(files, reader_options(opt), start);
  const uint64_t docs_before = enc.totals.documents;
  ProgressMeter meter(opt.progress, "encode", reader.bytes_total(), opt.progress_seconds,
                      reader.bytes_done(), docs_before);
  const size_t threads = static_cast<size_t>(thread_count(opt));
  // Chunks in corpus order; each encodes on a thread of its own, and they are written in the
  // order they were read, so the output does not depend on which thread finishes first.
  std::deque<std::future<EncodedChunk>> inflight;
  uint64_t documents_read = docs_before;
  auto write_front = [&]() {
    auto f = std::move(inflight.front());
    inflight.pop_front();
    enc.write(f.get());
  };
  try {
    for (;;) {
      auto chunk = std::make_shared<DocumentChunk>();
      if (!next_chunk(reader, opt.chunk_bytes, chunk.get())) break;
      documents_read += chunk->documents.size();
      inflight.push_back(std::async(std::launch::async, [&tok, &opt, chunk, by_position]() {
        return encode_chunk(tok, *chunk, opt.seed, opt.val_fraction, by_position);
      }));
      while (inflight.size() >= threads) write_front();
      meter.update(reader.bytes_done(), documents_read);
    }
    while (!inflight.empty()) write_front();
  } catch (...) {
    for (auto& f : inflight) f.wait();  // no thread outlives the tokenizer it reads
    throw;
  }
  enc.close_piece(reader.position());
  meter.finish(reader.bytes_total(), documents_read);
  *peak_reader_bytes = std::max(*peak_reader_bytes, reader.peak_buffer_bytes());
}

}  // namespace

PrepareResult run_prepare(const PrepareOptions& opt) {
  validate(opt);
  PrepareResult res;

  // Inputs and the output's staging dir (a killed run's, when there is one).
  const std::vector<InputFile> all_files = list_input_files(opt.inputs);
  std::vector<std::string> guarded = opt.inputs;
  if (!opt.tokenizer.empty()) guarded.push_back(opt.tokenizer);
  core::OutputDir out(opt.output_dir, {"prepare", guarded, opt.overwrite, /*resumable=*/true});
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
  std::optional<nlohmann::json> rehashed;
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
  const auto& hashes = (*state.hashes)["hashes"];
  std::vector<bool> skipped(all_files.size(), false);
  for (const auto& i : (*state.hashes)["skipped"]) skipped.at(i.get<size_t>()) = true;
  std::vector<InputFile> files;
  for (size_t i = 0; i < all_files.size(); ++i) {
    if (skipped[i]) {
      // Name the first few; a directory of index files (fortune's *.dat) would flood the log.
      if (res.skipped_files.size() < kMaxNamedSkips) {
        log::warn("skipping binary file " + all_files[i].path + " (NUL bytes in its first 8 KB)");
      }
      res.skipped_files.push_back(all_files[i].path);
    } else {
      files.push_back(all_files[i]);
    }
  }
  if (res.skipped_files.size() > kMaxNamedSkips) {
    log::warn(log::format("... skipped %zu more binary files (listed in prepare.json)",
                          res.skipped_files.size() - kMaxNamedSkips));
  }

  // 2. The tokenizer: trained on a sample of the training documents only, so validation text
  // stays unseen; or the one given (a model's own, so that its token ids mean what they meant
  // in pretraining). Either way encoding uses STAGING/tokenizer.json as written.
  res.tokenizer_path = stage + "/tokenizer.json";
  auto t0 = Clock::now();
  if (!state.tokenizer) {
    nlohmann::json rec;
    // Sampling also counts the documents the content-hash split puts in validation; when
    // either side would be empty, the split goes by position instead (and a trained
    // tokenizer's sample is then drawn again, from the training parts).
    const char* phase = opt.tokenizer.empty() ? "sample" : "count";
    SampleStats stats;
    std::vector<std::string> sample = sample_for_tokenizer(
        files, counting_or_sampling(opt), nullptr, phase, &stats, &res.peak_reader_bytes);
    const bool by_position = !hash_split_works(stats);
    if (by_position && stats.whole_documents > 0) {
      log::info(log::format(
          "prepare: too few documents for the content-hash split (%llu, of which it puts %llu "
          "in validation at val_fraction %g): splitting by position instead, the last %g of "
          "each document's bytes, cut at a line boundary, goes to validation",
          static_cast<unsigned long long>(stats.whole_documents),
          static_cast<unsigned long long>(stats.corpus_val_documents), opt.val_fraction,
          opt.val_fraction));
      const PiecedDocumentSizes pieced = std::move(stats.pieced);
      stats = SampleStats{};
      sample = sample_for_tokenizer(files, counting_or_sampling(opt), &pieced, phase, &stats,
                                    &res.peak_reader_bytes);
    }
    check_counts(stats.whole_documents, stats.corpus_documents - stats.corpus_val_documents,
                 stats.corpus_val_documents, by_position, opt);
    rec["split"] = by_position ? "position" : "hash";
    // The sizes of the documents read in pieces, which the split by position cuts by.
    nlohmann::json pieced = nlohmann::json::array();
    for (const auto& [first, size] : stats.pieced) {
      pieced.push_back({first.file, first.document, size});
    }
    rec["pieced_documents"] = pieced;
    if (!opt.tokenizer.empty()) {
      const auto given = BpeTokenizer::load(opt.tokenizer);
      log::info(log::format("tokenizer %s: vocab %zu, %zu merges", opt.tokenizer.c_str(),
                            given.vocab_size(), given.merges().size()));
      // A given tokenizer.json is copied as is (what its model was trained with), so
      // checkpoints that carry the same file hash equal; anything else is written in HF form.
      std::error_code ec;
      fs::copy_file(opt.tokenizer, res.tokenizer_path, fs::copy_options::overwrite_existing, ec);
      bool copied = false;
      try {
        copied = !ec && BpeTokenizer::load_hf(res.tokenizer_path).hash() == given.hash();
      } catch (const Error&) {
        copied = false;
      }
      if (!copied) given.save_hf(res.tokenizer_path);
      rec["hash"] = given.hash();
      rec["given"] = opt.tokenizer;
    } else {
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
      trained.save_hf(res.tokenizer_path);
      rec["hash"] = trained.hash();
      rec["sample_documents"] = stats.documents;
      rec["sample_bytes"] = stats.bytes;
      rec["seconds"] = seconds_since(t0);
    }
    core::fsync_path(res.tokenizer_path);
    journal.append({{"tokenizer", rec}});
    state.tokenizer = rec;
  }
  const BpeTokenizer tok = BpeTokenizer::load_hf(res.tokenizer_path);
  if (tok.hash() != (*state.tokenizer)["hash"].get<std::string>()) {
    throw Error("prepare: " + res.tokenizer_path + " (tokenizer " + tok.hash() +
                ") is not the tokenizer its journal records (" +
                (*state.tokenizer)["hash"].get<std::string>() + "): remove " + stage +
                " and run prepare again");
  }
  res.train_seconds = state.tokenizer->value("seconds", seconds_since(t0));
  const bool by_position = state.tokenizer->value("split", "hash") == "position";
  PiecedDocumentSizes pieced;
  for (const auto& p : state.tokenizer->value("pieced_documents", nlohmann::json::array())) {
    pieced[{p.at(0).get<uint64_t>(), p.at(1).get<uint64_t>()}] = p.at(2).get<uint64_t>();
  }

  // 3. Encode into pieces, on all threads.
  t0 = Clock::now();
  encode_corpus(files, opt, by_position ? &pieced : nullptr, tok, stage, journal, records,
                &res.peak_reader_bytes);
  res.encode_seconds = seconds_since(t0);
  const PieceRecord totals = records.empty() ? PieceRecord{} : records.back();
  const uint64_t n = totals.documents;
  check_counts(n, totals.train_documents, totals.val_documents, by_position, opt);

  res.num_files = files.size();
  res.num_documents = n;
  res.num_train_documents = totals.train_documents;
  res.num_val_documents = totals.val_documents;
  res.num_bytes = totals.train_bytes + totals.val_bytes;
  res.train_tokens = totals.train_tokens;
  res.val_tokens = totals.val_tokens;
  res.num_pieces = records.size();
  res.vocab_size = tok.vocab_size();
  res.tokenizer_hash = tok.hash();
  const uint64_t text_tokens = res.train_tokens + res.val_tokens - n;
  log::info(log::format(
      "encoded %.2f MB in %.2f s (%.2f MB/s): train %llu tokens (%zu docs), val %llu tokens "
      "(%zu docs), %.2f bytes/token, %zu pieces",
      res.num_bytes / 1e6, res.encode_seconds,
      res.num_bytes / 1e6 / std::max(res.encode_seconds, 1e-9),
      static_cast<unsigned long long>(res.train_tokens), res.num_train_documents,
      static_cast<unsigned long long>(res.val_tokens), res.num_val_documents,
      text_tokens ? static_cast<double>(res.num_bytes) / text_tokens : 0.0, res.num_pieces));

  // 4. prepare.json, then the output appears in one step.
  Json s;
  s["inputs"] = opt.inputs;
  Json listed = Json::array();
  for (size_t i = 0; i < all_files.size(); ++i) {
    Json f = {{"path", all_files[i].path},
              {"format", describe_format(all_files[i])},
              {"size", all_files[i].size},
              {"sha256", hashes.at(i).get<std::string>()}};
    if (skipped[i]) f["skipped"] = "binary";
    listed.push_back(f);
  }
  s["input_files"] = listed;
  s["files"] = res.num_files;
  s["skipped_files"] = res.skipped_files;
  s["doc_separator"] = opt.doc_separator;
  s["text_column"] = opt.text_column;
  if (!opt.tokenizer.empty()) {
    s["tokenizer"] = opt.tokenizer;
  } else {
    s["tokenizer_sample"] = {{"documents", (*state.tokenizer)["sample_documents"]},
                             {"bytes", (*state.tokenizer)["sample_bytes"]},
                             {"limit", opt.tokenizer_train_bytes}};
  }
  s["documents"] = {{"total", n}, {"train", totals.train_documents}, {"val", totals.val_documents}};
  s["bytes"] = {{"total", res.num_bytes}, {"train", totals.train_bytes}, {"val", totals.val_bytes}};
  s["tokens"] = {{"train", res.train_tokens}, {"val", res.val_tokens}};
  s["pieces"] = {{"train", records.size()}, {"val", records.size()}};
  Json piece_tokens = Json::array();
  for (const auto& r : records) {
    piece_tokens.push_back({{"train", r.piece_train_tokens}, {"val", r.piece_val_tokens}});
  }
  s["piece_tokens"] = piece_tokens;
  s["shard_tokens"] = opt.shard_tokens;
  s["bytes_per_token"] = text_tokens ? static_cast<double>(res.num_bytes) / text_tokens : 0.0;
  s["vocab_size"] = res.vocab_size;
  s["eot_id"] = tok.eot_id();
  s["dtype_bytes"] = shard_dtype_for_vocab(tok.vocab_size());
  s["tokenizer_hash"] = res.tokenizer_hash;
  s["val_fraction"] = opt.val_fraction;
  s["split"] = by_position
                   ? "by position: the last val_fraction of each document's bytes, cut at a "
                     "line boundary (data/position_split.h)"
                   : "by document content hash (data/document_hash.h)";
  s["seed"] = opt.seed;
  s["train_seconds"] = res.train_seconds;
  s["encode_seconds"] = res.encode_seconds;
  s["resumed_pieces"] = res.resumed_pieces;
  core::write_file_atomic(stage + "/prepare.json",
                          s.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
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
