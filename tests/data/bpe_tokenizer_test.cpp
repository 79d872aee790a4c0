#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <thread>

#include "core/error.h"
#include "data/bpe_trainer.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using Ids = std::vector<uint32_t>;
using lmtrain::testing::TempDir;
using lmtrain::testing::write_text;

std::string fixture(const std::string& name) {
  return lmtrain::testing::source_dir() + "/tests/fixtures/tokenizer/" + name;
}

BpeTokenizer fixture_gpt2() {
  return BpeTokenizer::load_gpt2(fixture("encoder.json"), fixture("vocab.bpe"));
}

std::string random_bytes(std::mt19937& rng, int max_len) {
  static const std::vector<std::string> pieces = {
      "the", " ", "\n", "'s", "hello", "\xC3\xA9", "\xE6\x97\xA5", "<|endoftext|>", "  ", "42"};
  std::string s;
  const int len = rng() % (max_len + 1);
  for (int i = 0; i < len; ++i) {
    if (rng() % 2) {
      s.push_back(static_cast<char>(rng() % 256));  // includes NUL and invalid UTF-8
    } else {
      s += pieces[rng() % pieces.size()];
    }
  }
  return s;
}

// Expected ids, worked out by hand from tests/fixtures/tokenizer/README.md (merge rank: result):
//   0 h+e=256  1 l+l=257  2 he+ll=258  3 Ġ+w=259  4 o+r=260  5 Ġw+or=261  6 hell+o=262
//   7 Ġ+t=263  8 Ġt+he=264  9 '+s=265;  bytes: h71 e68 l75 o78 w86 r81 d67 t83 Ġ220 Ċ198
void expect_reference_ids(const BpeTokenizer& tok) {
  EXPECT_EQ(tok.vocab_size(), 267u);
  EXPECT_EQ(tok.eot_id(), 266u);
  // "hello" : h e l l o -> he l l o (r0) -> he ll o (r1) -> hell o (r2) -> hello (r6)
  // " world": Ġ w o r l d -> Ġw o r l d (r3) -> Ġw or l d (r4) -> Ġwor l d (r5)
  EXPECT_EQ(tok.encode("hello world"), (Ids{262, 261, 75, 67}));
  // "hellllo": he l l l l o (r0) -> he ll l l o (r1, leftmost) -> he ll ll o (r1)
  //            -> hell ll o (r2); no merge for (hell, ll) or (ll, o).
  EXPECT_EQ(tok.encode("hellllo"), (Ids{258, 257, 78}));
  // "the" -> t he (r0), no (t, he) merge; " hello" -> Ġ hello; "'s" -> 265; "\n" -> Ċ
  EXPECT_EQ(tok.encode("the hello's\n"), (Ids{83, 256, 220, 262, 265, 198}));
  // " the": Ġ t he (r0) -> Ġt he (r7) -> Ġthe (r8)
  EXPECT_EQ(tok.encode(" the"), (Ids{264}));
  // Plain encode treats special-token text as ordinary bytes: "<|", "endoftext", "|>".
  EXPECT_EQ(tok.encode("<|endoftext|>"), (Ids{27, 91, 68, 77, 67, 78, 69, 83, 68, 87, 83, 91, 29}));
  EXPECT_EQ(tok.encode_with_special("hello<|endoftext|> the"), (Ids{262, 266, 264}));
  EXPECT_EQ(tok.decode(Ids{262, 266, 264}), "hello<|endoftext|> the");
}

TEST(BpeTokenizer, Gpt2FilesGiveHandComputedIds) { expect_reference_ids(fixture_gpt2()); }

TEST(BpeTokenizer, HfFileGivesHandComputedIds) {
  const BpeTokenizer hf = BpeTokenizer::load_hf(fixture("tokenizer.json"));
  expect_reference_ids(hf);
  // Same vocabulary and merges -> same hash, whatever the file format.
  EXPECT_EQ(hf.hash(), fixture_gpt2().hash());
  EXPECT_EQ(hf.hash().size(), 16u);
  EXPECT_EQ(BpeTokenizer::load(fixture("tokenizer.json")).hash(), hf.hash());
}

TEST(BpeTokenizer, SaveHfRoundTrip) {
  TempDir dir;
  const BpeTokenizer a = fixture_gpt2();
  a.save_hf(dir.file("tokenizer.json"));
  const BpeTokenizer b = BpeTokenizer::load_hf(dir.file("tokenizer.json"));
  expect_reference_ids(b);
  EXPECT_EQ(b.hash(), a.hash());

  // A trained tokenizer too (its single bytes have ids 0..255, not GPT-2's order).
  const BpeTokenizer t =
      train_bpe({"the cat sat on the mat, the cat ate the rat", "hello there"}, 280);
  t.save_hf(dir.file("trained.json"));
  const BpeTokenizer u = BpeTokenizer::load(dir.file("trained.json"));
  EXPECT_EQ(u.hash(), t.hash());
  EXPECT_EQ(u.vocab_size(), t.vocab_size());
  std::mt19937 rng(7);
  for (int i = 0; i < 100; ++i) {
    const std::string s = random_bytes(rng, 60);
    ASSERT_EQ(u.encode(s), t.encode(s));
  }
  EXPECT_EQ(u.encode("the cat"), t.encode("the cat"));
  EXPECT_LT(t.encode("the cat").size(), 7u);
}

TEST(BpeTokenizer, DecodeInvertsEncodeOnArbitraryBytes) {
  const BpeTokenizer gpt2 = fixture_gpt2();
  const BpeTokenizer trained =
      train_bpe({"hello world, the world says hello\n", "\xC3\xA9t\xC3\xA9 \xE6\x97\xA5"}, 300);
  std::mt19937 rng(1234);
  for (int i = 0; i < 1000; ++i) {
    const std::string s = random_bytes(rng, 80);
    ASSERT_EQ(gpt2.decode(gpt2.encode(s)), s) << "case " << i;
    ASSERT_EQ(trained.decode(trained.encode(s)), s) << "case " << i;
    ASSERT_EQ(trained.decode(trained.encode_with_special(s)), s) << "case " << i;
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(gpt2.decode(gpt2.encode(all)), all);
  // Encoding twice (the second time from the cache) gives the same ids.
  EXPECT_EQ(gpt2.encode(all), gpt2.encode(all));
}

// GPT-2's reference algorithm: repeatedly merge every occurrence of the lowest-ranked pair.
Ids reference_bpe(const BpeTokenizer& tok, const std::string& word) {
  std::vector<std::string> parts;
  for (char c : word) parts.emplace_back(1, c);
  const auto& merges = tok.merges();
  while (parts.size() > 1) {
    size_t best = merges.size();
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      for (size_t r = 0; r < best; ++r) {
        if (tok.token_bytes(merges[r].first) == parts[i] &&
            tok.token_bytes(merges[r].second) == parts[i + 1]) {
          best = r;
          break;
        }
      }
    }
    if (best == merges.size()) break;
    const std::string& a = tok.token_bytes(merges[best].first);
    const std::string& b = tok.token_bytes(merges[best].second);
    std::vector<std::string> next;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i + 1 < parts.size() && parts[i] == a && parts[i + 1] == b) {
        next.push_back(a + b);
        ++i;
      } else {
        next.push_back(parts[i]);
      }
    }
    parts.swap(next);
  }
  Ids ids;
  for (const std::string& p : parts) {
    bool found = false;
    for (uint32_t id = 0; id < tok.vocab_size() && !found; ++id) {
      if (!tok.is_special(id) && tok.token_bytes(id) == p) {
        ids.push_back(id);
        found = true;
      }
    }
  }
  return ids;
}

TEST(BpeTokenizer, MatchesReferenceAlgorithmOnShortAndLongWords) {
  const BpeTokenizer tok = fixture_gpt2();
  std::mt19937 rng(99);
  const std::string letters = "hello";
  for (int i = 0; i < 200; ++i) {
    // Lengths beyond 128 exercise the heap-based merge used for long words.
    const int len = 1 + (i % 4 == 0 ? rng() % 600 : rng() % 40);
    std::string w;
    for (int k = 0; k < len; ++k) w.push_back(letters[rng() % letters.size()]);
    ASSERT_EQ(tok.encode(w), reference_bpe(tok, w)) << w;
  }
}

// The word cache belongs to a tokenizer and is shared by threads: tokenizers used in turn on one
// thread, a tokenizer built where a destroyed one lived, and several threads at once all get the
// ids the tokenizer gives on a thread of its own.
TEST(BpeTokenizer, WordCacheKeepsTokenizersAndThreadsApart) {
  std::vector<std::string> words;
  std::mt19937 rng(7);
  const std::string letters = "helowrd";
  for (int i = 0; i < 400; ++i) {
    std::string w = i % 2 ? " " : "";
    const int len = 2 + rng() % 30;  // across the cache's word-size limit
    for (int k = 0; k < len; ++k) w.push_back(letters[rng() % letters.size()]);
    words.push_back(w);
  }
  auto encode_all = [&](const BpeTokenizer& tok) {
    std::vector<Ids> ids;
    for (const std::string& w : words) ids.push_back(tok.encode(w));
    return ids;
  };
  auto on_new_thread = [&](const BpeTokenizer& tok) {
    std::vector<Ids> ids;
    std::thread([&] { ids = encode_all(tok); }).join();
    return ids;
  };
  const BpeTokenizer gpt2 = fixture_gpt2();
  const BpeTokenizer trained = train_bpe({"hello world, the world says hello hold old led"}, 300);
  const auto want_gpt2 = on_new_thread(gpt2), want_trained = on_new_thread(trained);
  ASSERT_NE(want_gpt2, want_trained);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < words.size(); ++i) {
      ASSERT_EQ(gpt2.encode(words[i]), want_gpt2[i]) << words[i];
      ASSERT_EQ(trained.encode(words[i]), want_trained[i]) << words[i];
    }
  }
  for (int round = 0; round < 3; ++round) {
    auto tok = std::make_unique<BpeTokenizer>(round % 2 ? fixture_gpt2() : trained);
    EXPECT_EQ(encode_all(*tok), round % 2 ? want_gpt2 : want_trained) << "round " << round;
  }
  std::vector<std::thread> threads;
  std::vector<std::vector<Ids>> got(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { got[t] = encode_all(t % 2 ? gpt2 : trained); });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], t % 2 ? want_gpt2 : want_trained) << "thread " << t;
  for (size_t i = 0; i < words.size(); ++i)
    ASSERT_EQ(want_gpt2[i], reference_bpe(gpt2, words[i])) << words[i];
}

TEST(BpeTokenizer, CustomPatternSurvivesSaveAndLoad) {
  // Qwen2 / Qwen3 pre-tokenizer: digits one by one, punctuation keeps trailing newlines.
  const std::string qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
      R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
  BpeTrainerOptions options;
  options.vocab_size = 300;
  options.pattern = qwen;
  BpeTrainer trainer(options);
  trainer.add_document("1234 1234 1234 IT'S it's done.\n\n");
  const BpeTokenizer t = trainer.train();
  EXPECT_EQ(t.encode("1234").size(), 4u);  // digits never merge across pre-tokens
  TempDir dir;
  t.save_hf(dir.file("qwen.json"));
  EXPECT_NE(lmtrain::testing::read_text(dir.file("qwen.json")).find("\"Split\""),
            std::string::npos);
  const BpeTokenizer u = BpeTokenizer::load_hf(dir.file("qwen.json"));
  EXPECT_EQ(u.options().pattern, qwen);
  EXPECT_EQ(u.hash(), t.hash());
  EXPECT_NE(u.hash(), train_bpe({"1234 1234 1234 IT'S it's done.\n\n"}, 300).hash());
  EXPECT_EQ(u.encode("IT'S 1234."), t.encode("IT'S 1234."));
}

TEST(BpeTokenizer, VeryLongWordsStayFast) {
  // One 300 KB pre-token goes through the O(n log n) merge path.
  const BpeTokenizer tok = fixture_gpt2();
  std::string word;
  for (int i = 0; i < 60000; ++i) word += "hello";
  const auto ids = tok.encode(word);
  EXPECT_EQ(ids, Ids(60000, 262));
  std::string junk(300000, '\xFF');  // one long run of invalid UTF-8
  EXPECT_EQ(tok.decode(tok.encode(junk)), junk);
}

TEST(BpeTokenizer, OutOfRangeIdIsAnError) {
  const BpeTokenizer tok = fixture_gpt2();
  EXPECT_THROW(tok.decode(Ids{267}), Error);
}

TEST(BpeTokenizer, MalformedFilesNameTheFile) {
  TempDir dir;
  auto expect_error = [](const std::function<void()>& fn, const std::string& needle) {
    try {
      fn();
      FAIL() << "no error, expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  write_text(dir.file("bad.json"), "{ not json");
  expect_error([&] { BpeTokenizer::load_hf(dir.file("bad.json")); }, "bad.json");
  expect_error([&] { BpeTokenizer::load_hf(dir.file("missing.json")); }, "missing.json");

  write_text(dir.file("vocab.bpe"), "#version: 0.2\nh e\nh e l\n");
  expect_error([&] { BpeTokenizer::load_gpt2(fixture("encoder.json"), dir.file("vocab.bpe")); },
               "vocab.bpe:3");
  write_text(dir.file("vocab.bpe"), "h q\xC3\xA9\n");
  expect_error([&] { BpeTokenizer::load_gpt2(fixture("encoder.json"), dir.file("vocab.bpe")); },
               "not in the vocabulary");
  // A merge whose result is not a token.
  write_text(dir.file("vocab.bpe"), "e h\n");
  expect_error([&] { BpeTokenizer::load_gpt2(fixture("encoder.json"), dir.file("vocab.bpe")); },
               "missing from the vocabulary");

  write_text(dir.file("wp.json"), R"({"model": {"type": "WordPiece", "vocab": {}}})");
  expect_error([&] { BpeTokenizer::load_hf(dir.file("wp.json")); }, "WordPiece");
  // A vocabulary without every single byte could not encode arbitrary input.
  write_text(dir.file("small.json"),
             R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE",
                 "vocab": {"a": 0, "b": 1}, "merges": []}})");
  expect_error([&] { BpeTokenizer::load_hf(dir.file("small.json")); }, "small.json");
}

}  // namespace
}  // namespace lmtrain::data
