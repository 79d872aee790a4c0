#include "data/stream/stream_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "data/bpe_trainer.h"
#include "data/corpus/corpus_test_util.h"
#include "data/prepare.h"
#include "data/stream/stream_units.h"
#include "data/token_split.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using testing::gzip_bytes;
using testing::TempDir;
using testing::write_parquet;
using testing::write_text;
using testing::zstd_bytes;

// A corpus of 240 distinct documents over JSONL, JSONL.gz, JSONL.zst, text and (when built)
// parquet with several row groups; the uncompressed files in blocks: 9 or more stream units.
struct StreamCorpus {
  TempDir dir{"lmtrain_stream"};
  std::vector<std::string> docs;
  std::vector<InputFile> files;
  std::vector<StreamUnit> units;
  std::optional<BpeTokenizer> tok;

  StreamCorpus() {
    const std::vector<std::string> words = {"amber", "river",  "stone", "quiet", "light",
                                            "north", "hollow", "ember", "cafe",  "sings"};
    for (int i = 0; i < 240; ++i) {
      std::string d = "doc " + std::to_string(i) + ":";
      for (int k = 0; k < 3 + (i * 13) % 40; ++k) d += " " + words[(i * 7 + k * 3) % 10];
      docs.push_back(d + ".");
    }
    auto jsonl = [&](int from, int to) {
      std::string s;
      for (int i = from; i < to; ++i) s += nlohmann::json{{"text", docs[i]}}.dump() + "\n";
      return s;
    };
    write_text(dir.file("a.jsonl"), jsonl(0, 40));
    write_text(dir.file("b.jsonl.gz"), gzip_bytes(jsonl(40, 80)));
    write_text(dir.file("c.jsonl.zst"), zstd_bytes(jsonl(80, 120)));
    std::string text;
    for (int i = 120; i < 160; ++i) text += docs[i] + "\n%\n";
    write_text(dir.file("d.txt"), text);
    write_text(dir.file("e.jsonl"), jsonl(160, 200));
    if (testing::parquet_built()) {
      std::vector<std::optional<std::string>> rows(docs.begin() + 200, docs.end());
      EXPECT_EQ(write_parquet(dir.file("f.parquet"), rows, 10), 4);
    } else {
      write_text(dir.file("f.jsonl"), jsonl(200, 240));
    }
    files = list_input_files({dir.path()});
    // Blocks of 600 bytes: the uncompressed JSONL and separated text files are split too.
    units = list_stream_units(files, options().reader, 600);
    BpeTrainerOptions o;
    o.vocab_size = 300;
    BpeTrainer t(o);
    for (const auto& d : docs) t.add_document(d);
    tok = t.train();
  }

  StreamOptions options(int threads = 2) const {
    StreamOptions o;
    o.reader.doc_separator = "%";
    o.batch_rows = 3;
    o.seq_len = 16;
    o.seed = 11;
    o.tokenizer_threads = threads;
    o.queue_batches = 2;
    o.chunk_bytes = 200;
    return o;
  }
  std::unique_ptr<StreamLoader> loader(int rank, int world, StreamPosition start,
                                       int threads = 2) const {
    start.rank = rank;
    start.world = world;
    return std::make_unique<StreamLoader>(files, units, *tok, options(threads), rank, world, start);
  }
};

// Over one epoch at 1, 2 and 3 ranks every unit, so every document, is read exactly once.
TEST(StreamLoader, EveryDocumentOnceAnEpochAtOneTwoAndThreeRanks) {
  StreamCorpus c;
  ASSERT_GE(c.units.size(), 9u);
  std::multiset<std::string> all;
  for (const auto& u : c.units) {
    read_unit_documents(u, c.files, c.options().reader, [&](std::string& t) {
      all.insert(t);
      return true;
    });
  }
  ASSERT_EQ(all.size(), c.docs.size());
  for (int world : {1, 2, 3}) {
    for (int64_t epoch : {0, 1}) {
      std::multiset<std::string> seen;
      for (int rank = 0; rank < world; ++rank) {
        for (size_t u : rank_units(c.units.size(), 11, epoch, rank, world, true)) {
          read_unit_documents(c.units[u], c.files, c.options().reader, [&](std::string& t) {
            seen.insert(t);
            return true;
          });
        }
      }
      EXPECT_EQ(seen, all) << world << " ranks, epoch " << epoch;
    }
  }
  // Epochs deal the units in different orders.
  EXPECT_NE(rank_units(c.units.size(), 11, 0, 0, 1, true),
            rank_units(c.units.size(), 11, 1, 0, 1, true));
}

// The stream gives each document the tokens prepare gives it: its encoding and <|endoftext|>.
TEST(StreamLoader, DocumentsHaveTheTokensPrepareGivesThem) {
  StreamCorpus c;
  // prepare with the same tokenizer, every document's tokens by its text
  write_text(c.dir.file("tok.json"), "");
  c.tok->save_hf(c.dir.file("tok.json"));
  PrepareOptions po;
  for (const auto& f : c.files) po.inputs.push_back(f.path);
  po.output_dir = c.dir.file("prepared");
  po.tokenizer = c.dir.file("tok.json");
  po.doc_separator = "%";
  po.val_fraction = 0.2;
  po.progress = [](const PrepareProgress&) {};
  const auto r = run_prepare(po);
  const BpeTokenizer ptok = BpeTokenizer::load_hf(r.tokenizer_path);
  std::map<std::string, std::vector<uint32_t>> prepared;
  for (const char* split : {"train", "val"}) {
    const TokenSplit s = TokenSplit::open(po.output_dir, split);
    std::vector<uint32_t> cur;
    for (size_t i = 0; i < s.size(); ++i) {
      cur.push_back(s.at(i));
      if (cur.back() == ptok.eot_id()) {
        cur.pop_back();
        prepared[ptok.decode(cur)] = cur;
        cur.clear();
      }
    }
  }
  ASSERT_EQ(prepared.size(), c.docs.size());

  auto l = c.loader(0, 1, {});
  std::vector<uint32_t> tokens;
  const size_t row = 17;
  for (int b = 0; b < 300; ++b) {
    const auto batch = l->next();
    ASSERT_EQ(batch.rows.size(), 3 * row);
    for (size_t i = 0; i < batch.rows.size(); i += row) {
      for (size_t k = tokens.empty() ? 0 : 1; k < row; ++k) {
        tokens.push_back(static_cast<uint32_t>(batch.rows[i + k]));
      }
    }
  }
  // Every complete document of the stream (the last one may be cut off) is one of prepare's,
  // with the same tokens.
  size_t checked = 0;
  std::vector<uint32_t> cur;
  for (uint32_t t : tokens) {
    if (t != c.tok->eot_id()) {
      cur.push_back(t);
      continue;
    }
    const std::string text = c.tok->decode(cur);
    const auto it = prepared.find(text);
    ASSERT_NE(it, prepared.end()) << "a document prepare does not have: " << text;
    EXPECT_EQ(cur, it->second) << text;
    ++checked;
    cur.clear();
  }
  EXPECT_GT(checked, c.docs.size());  // more than an epoch
}

// A loader started at the position a batch carries produces what the uninterrupted loader
// produced after that batch, bit for bit: at 1 and 2 ranks, across an epoch boundary, at
// another tokenizer thread count.
TEST(StreamLoader, ResumeFromAPositionIsBitwiseTheUninterruptedStream) {
  StreamCorpus c;
  for (int world : {1, 2}) {
    for (int rank = 0; rank < world; ++rank) {
      auto whole = c.loader(rank, world, {}, 1);
      std::vector<StreamBatch> batches;
      for (int b = 0; b < 260; ++b) batches.push_back(whole->next());
      ASSERT_GT(batches.back().next.epoch, 0) << "the test should cross an epoch boundary";
      EXPECT_LE(whole->max_queued(), 2u);
      for (int at : {0, 7, 61, 120, 230}) {
        auto resumed = c.loader(rank, world, batches[at].next, 3);
        for (int b = at + 1; b < at + 25 && b < 260; ++b) {
          const auto got = resumed->next();
          ASSERT_EQ(got.rows, batches[b].rows) << "rank " << rank << " of " << world
                                               << ", resumed after batch " << at << ", batch " << b;
          ASSERT_TRUE(got.next == batches[b].next);
        }
      }
    }
  }
}

TEST(StreamLoader, PositionsAreRefusedAtAnotherWorldSize) {
  StreamCorpus c;
  auto l = c.loader(0, 2, {});
  const auto b = l->next();
  const auto json = b.next.to_json();
  EXPECT_EQ(StreamPosition::from_json(json).to_json(), json);
  StreamPosition saved = StreamPosition::from_json(json);
  // The numbers a collective gathers (train/stream_data.cpp) read back as the same position.
  const auto values = saved.to_values();
  ASSERT_EQ(values.size(), StreamPosition::kValues);
  EXPECT_TRUE(StreamPosition::from_values(values.data()) == saved);
  EXPECT_EQ(StreamPosition::from_values(values.data()).world, 2);
  try {
    StreamLoader other(c.files, c.units, *c.tok, c.options(), 0, 3, saved);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saved by rank 0 of 2; this is rank 0 of 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(StreamPosition::from_json(nlohmann::json{{"epoch", 1}}), Error);
}

TEST(StreamUnits, SplitIsByUnitAndKeepsBothSides) {
  StreamCorpus c;
  const auto s = split_stream_units(c.units, c.files, 0.2, 5);
  EXPECT_GE(s.val.size(), 1u);
  EXPECT_GE(s.train.size(), 1u);
  EXPECT_EQ(s.val.size() + s.train.size(), c.units.size());
  const auto again = split_stream_units(c.units, c.files, 0.2, 5);
  EXPECT_EQ(again.val.size(), s.val.size());
  const auto none = split_stream_units(c.units, c.files, 1e-9, 5);
  EXPECT_EQ(none.val.size(), 1u);  // at least one validation unit
}

TEST(StreamUnits, ValFractionZeroHoldsOutNoUnit) {
  StreamCorpus c;
  const auto s = split_stream_units(c.units, c.files, 0.0, 5);
  EXPECT_EQ(s.val.size(), 0u);
  EXPECT_EQ(s.train.size(), c.units.size());
}

// Units without a document (a file of blank documents) first in the order: a fresh stream reads
// on past them and gives, batch for batch, the stream without them.
TEST(StreamLoader, UnitsWithoutADocumentAreSkippedFromAFreshStart) {
  StreamCorpus c;
  write_text(c.dir.file("blank1.txt"), "%\n\n%\n");
  write_text(c.dir.file("blank2.txt"), "   \n");
  std::vector<InputFile> files =
      list_input_files({c.dir.file("blank1.txt"), c.dir.file("blank2.txt")});
  files.insert(files.end(), c.files.begin(), c.files.end());
  StreamOptions o = c.options();
  o.shuffle = false;
  StreamLoader with_blanks(files, list_stream_units(files, o.reader, 600), *c.tok, o, 0, 1, {});
  StreamLoader without(c.files, c.units, *c.tok, o, 0, 1, {});
  for (int b = 0; b < 5; ++b) {
    const auto got = with_blanks.next(), want = without.next();
    ASSERT_EQ(got.rows, want.rows) << "batch " << b;
    // Positions count units of this stream: two more, the blank ones, before the same text.
    EXPECT_EQ(got.next.unit, want.next.unit + 2) << "batch " << b;
    EXPECT_EQ(got.next.document, want.next.document) << "batch " << b;
  }
}

TEST(StreamLoader, ARankWhoseUnitsHoldNoDocumentIsToldSoWithTheCounts) {
  StreamCorpus c;
  write_text(c.dir.file("blank.txt"), "%\n%\n");
  std::vector<InputFile> files = list_input_files({c.dir.file("blank.txt"), c.dir.file("d.txt")});
  StreamOptions o = c.options();
  o.shuffle = false;  // rank 0 reads unit 0 (blank.txt), rank 1 unit 1 (d.txt)
  const auto units = list_stream_units(files, o.reader, 0);
  ASSERT_EQ(units.size(), 2u);
  StreamLoader rank1(files, units, *c.tok, o, 1, 2, {0, 0, 0, 0, 1, 2});
  EXPECT_EQ(rank1.next().rows.size(), 3u * 17u);
  StreamLoader rank0(files, units, *c.tok, o, 0, 2, {0, 0, 0, 0, 0, 2});
  try {
    rank0.next();
    FAIL() << "expected an error";
  } catch (const NoStreamDocument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "rank 0 of 2 has no document to read: its 1 unit(s) of 2 in epoch 0 hold none"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::data
