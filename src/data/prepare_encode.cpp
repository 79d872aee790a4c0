// Stage 3 of `lmtrain prepare`: the corpus encoded into token pieces, chunk by chunk on all
// threads, written in corpus order so that the output is the same at any thread count; each
// finished piece journaled, so that a killed run goes on after it.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string_view>
#include <utility>

#include "core/fault_injection.h"
#include "core/fs.h"
#include "data/corpus/corpus_reader.h"
#include "data/document_hash.h"
#include "data/prepare_stages.h"
#include "data/token_shard.h"
#include "data/token_split.h"

namespace lmtrain::data::prepare_detail {
namespace {

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

}  // namespace

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

}  // namespace lmtrain::data::prepare_detail
