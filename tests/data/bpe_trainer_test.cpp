#include "data/bpe_trainer.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "data/pretokenizer.h"

namespace lmtrain::data {
namespace {

// Fortune-like text: short sayings built from a small phrase book, so there is structure to
// learn but not one repeated string.
std::vector<std::string> sayings(int n, uint32_t seed) {
  const std::vector<std::string> subjects = {"A fool",        "The wise man",  "Every programmer",
                                             "Your computer", "A penny saved", "Nobody"};
  const std::vector<std::string> verbs = {"knows",    "forgets", "remembers",
                                          "compiles", "debugs",  "is worth"};
  const std::vector<std::string> objects = {"the answer.",           "nothing at all.",
                                            "a segmentation fault.", "the meaning of life.",
                                            "two in the bush.",      "what you did last summer."};
  std::mt19937 rng(seed);
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    std::string d;
    const int lines = 1 + rng() % 3;
    for (int l = 0; l < lines; ++l) {
      d += subjects[rng() % subjects.size()] + " " + verbs[rng() % verbs.size()] + " " +
           objects[rng() % objects.size()] + "\n";
    }
    d += "\t\t-- Fortune #" + std::to_string(rng() % 1000) + "\n";
    docs.push_back(d);
  }
  return docs;
}

TEST(BpeTrainer, RejectsTooSmallVocab) {
  BpeTrainerOptions options;
  options.vocab_size = 256;
  EXPECT_THROW(BpeTrainer{options}, Error);
}

TEST(BpeTrainer, TiesGoToTheLexicographicallySmallestPair) {
  // "abcd": pairs ab, bc, cd all occur once -> (a,b) first; then (ab,c) beats (c,d) because
  // "ab" < "c"; then (abc,d). Ids: bytes 0..255, merges 256.., <|endoftext|> last.
  const BpeTokenizer tok = train_bpe({"abcd"}, 260);
  ASSERT_EQ(tok.merges().size(), 3u);
  EXPECT_EQ(tok.merges()[0], (BpeTokenizer::Merge{'a', 'b'}));
  EXPECT_EQ(tok.merges()[1], (BpeTokenizer::Merge{256, 'c'}));
  EXPECT_EQ(tok.merges()[2], (BpeTokenizer::Merge{257, 'd'}));
  EXPECT_EQ(tok.token_bytes(258), "abcd");
  EXPECT_EQ(tok.eot_id(), 259u);
  EXPECT_EQ(tok.vocab_size(), 260u);
  EXPECT_EQ(tok.encode("abcd"), (std::vector<uint32_t>{258}));
  EXPECT_EQ(tok.encode("abc abd"), (std::vector<uint32_t>{257, ' ', 256, 'd'}));
}

TEST(BpeTrainer, MostFrequentPairFirst) {
  // (x,y) occurs 3 times, (a,b) twice: xy is learned first despite "ab" < "xy".
  const BpeTokenizer tok = train_bpe({"xy xy xy ab ab"}, 258);
  ASSERT_EQ(tok.merges().size(), 1u);
  EXPECT_EQ(tok.token_bytes(256), "xy");
}

TEST(BpeTrainer, StopsEarlyWhenPairsRunOut) {
  const BpeTokenizer tok = train_bpe({"abcd"}, 1000);
  EXPECT_EQ(tok.vocab_size(), 260u);
  EXPECT_EQ(tok.eot_id(), 259u);
}

TEST(BpeTrainer, DeterministicAndExactVocabSize) {
  const auto docs = sayings(300, 5);
  const BpeTokenizer a = train_bpe(docs, 400);
  const BpeTokenizer b = train_bpe(docs, 400);
  EXPECT_EQ(a.vocab_size(), 400u);
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_EQ(a.hash(), b.hash());
  // Document order changes hash-map iteration order but not the result.
  auto reversed = docs;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(train_bpe(reversed, 400).hash(), a.hash());
}

TEST(BpeTrainer, EncodeReproducesTrainerSegmentation) {
  const auto docs = sayings(300, 11);
  BpeTrainerOptions options;
  options.vocab_size = 500;
  BpeTrainer trainer(options);
  for (const auto& d : docs) trainer.add_document(d);
  const BpeTokenizer tok = trainer.train();
  const Pretokenizer pretok;
  size_t checked = 0;
  for (size_t i = 0; i < 50; ++i) {
    for (std::string_view w : pretok.split(docs[i])) {
      const auto seg = trainer.segmentation(w);
      ASSERT_FALSE(seg.empty()) << w;
      ASSERT_EQ(tok.encode(w), seg) << w;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500u);
  EXPECT_EQ(trainer.segmentation("never-seen-word"), std::vector<uint32_t>{});
}

TEST(BpeTrainer, CompressesRepetitiveText) {
  const auto train_docs = sayings(400, 1);
  const BpeTokenizer tok = train_bpe(train_docs, 512);
  // Held-out sayings from the same phrase book.
  size_t bytes = 0, tokens = 0;
  for (const auto& d : sayings(100, 2)) {
    const auto ids = tok.encode(d);
    ASSERT_EQ(tok.decode(ids), d);
    bytes += d.size();
    tokens += ids.size();
  }
  const double bytes_per_token = static_cast<double>(bytes) / tokens;
  EXPECT_GT(bytes_per_token, 1.5);
  EXPECT_GT(bytes_per_token, 3.0);  // whole words and phrases get merged
}

}  // namespace
}  // namespace lmtrain::data
