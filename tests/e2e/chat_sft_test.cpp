// SFT with the real binary (issue 41): a tiny base with nanochat's chat tokens
// (`prepare --chat_tokens`), conversations whose user text is noise and whose answer is a
// lookup of one word of it, `prepare --chat` (the loss mask on disk), then `train
// --data.format=chat` from the base: the assistant-only validation loss falls far below what
// the noise allows (so the noise is not trained on), a stopped and resumed run equals an
// uninterrupted one bitwise, LoRA and 2 ranks (ZeRO-1) run on the same data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/sha256.h"
#include "data/bpe_tokenizer.h"
#include "data/token_shard.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

const std::vector<std::string> kItems = {"apple", "sky", "grass", "snow", "coal", "sun"};
const std::vector<std::string> kColors = {"red", "blue", "green", "white", "black", "yellow"};
const std::vector<std::string> kNoise = {"the", "a",     "old",  "man",  "sea",  "ran",  "big",
                                         "cat", "dog",   "hill", "rock", "tree", "fast", "slow",
                                         "day", "night", "cold", "warm", "it",   "was"};

// Conversations fit 64 tokens; the chat tasks' multiple-choice prompt needs more.
std::string chat_flags() {
  return tiny_train_flags() + " --model.block_size=128 --data.seq_len=64";
}

std::vector<nlohmann::json> records(const std::string& run, const char* key) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key)) out.push_back(j);
  }
  return out;
}

// Two runs' losses step by step: `steps` of each, within `tol` (0: bitwise).
void expect_losses_match(const std::string& a, const std::string& b, size_t steps, double tol) {
  const auto la = logged_losses(a), lb = logged_losses(b);
  ASSERT_EQ(la.size(), steps) << a;
  ASSERT_EQ(lb.size(), steps) << b;
  for (size_t i = 0; i < steps; ++i) {
    if (tol == 0) {
      EXPECT_EQ(la[i], lb[i]) << "step " << i + 1;
    } else {
      EXPECT_NEAR(la[i], lb[i], tol) << "step " << i + 1;
    }
  }
}

class ChatSft : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_chat_sft");
    const std::string corpus = write_synthetic_corpus(dir_->path(), 200, 1);
    auto r = run_command(lmtrain_binary() + " prepare --input " + corpus + " --output " +
                         dir_->file("base_data") +
                         " --vocab_size 420 --doc_separator % --chat_tokens --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(lmtrain_binary() + " train" + chat_flags() +
                    " --data.dir=" + dir_->file("base_data") + " --run.dir=" + dir_->file("base") +
                    " --train.max_steps=60 --optim.lr=1e-2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // 400 conversations: a system prompt sometimes, noise, then the item whose color answers.
    std::mt19937 rng(5);
    std::ofstream f(dir_->file("convs.jsonl"));
    for (int i = 0; i < 400; ++i) {
      std::string noise;
      for (int k = 0; k < 6; ++k) noise += kNoise[rng() % kNoise.size()] + " ";
      const size_t item = rng() % kItems.size();
      nlohmann::json messages = nlohmann::json::array();
      if (i % 3 == 0) messages.push_back({{"role", "system"}, {"content", "be brief"}});
      messages.push_back({{"role", "user"}, {"content", noise + "color of " + kItems[item] + "?"}});
      messages.push_back({{"role", "assistant"}, {"content", "It is " + kColors[item] + "."}});
      f << nlohmann::json{{"messages", messages}}.dump() << "\n";
    }
    f.close();
    r = run_command(lmtrain_binary() + " prepare --chat --input " + dir_->file("convs.jsonl") +
                    " --tokenizer " + dir_->file("base_data/tokenizer.json") + " --output " +
                    dir_->file("sft_data") + " --val_fraction 0.1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    prepare_output_ = r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static CommandResult sft(const std::string& run, const std::string& extra,
                           const std::string& lr = "3e-3") {
    return run_command(
        lmtrain_binary() + " train" + chat_flags() + " --data.dir=" + dir_->file("sft_data") +
        " --data.format=chat --run.dir=" + run + " --model.init_from=" + dir_->file("base") +
        " --optim.lr=" + lr + " --optim.warmup_steps=2" + extra);
  }
  static TempDir* dir_;
  static std::string prepare_output_;
};
TempDir* ChatSft::dir_ = nullptr;
std::string ChatSft::prepare_output_;

TEST_F(ChatSft, PrepareWritesTheAssistantsTokensAsTheMask) {
  EXPECT_TRUE(contains(prepare_output_, "(nanochat)")) << prepare_output_;
  const auto summary = nlohmann::json::parse(read_text(dir_->file("sft_data/chat.json")));
  EXPECT_EQ(summary["format"], "nanochat");
  const int64_t train_n = summary["train"]["conversations"],
                val_n = summary["val"]["conversations"];
  EXPECT_EQ(train_n + val_n, 400);
  EXPECT_GT(val_n, 15);
  const auto tok = data::BpeTokenizer::load_hf(dir_->file("sft_data/tokenizer.json"));
  for (const std::string split : {"train", "val"}) {
    data::TokenShard ids(dir_->file("sft_data/" + split + ".bin"));
    data::TokenShard mask(dir_->file("sft_data/" + split + "_mask.bin"));
    ASSERT_EQ(ids.size(), mask.size());
    // Per conversation: the targets spell exactly the answer and the end token.
    std::vector<std::string> answers;
    std::vector<uint32_t> targets;
    int64_t starts = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (mask.at(i) == 2) {
        ++starts;
        EXPECT_EQ(ids.at(i), *tok.special_id("<|bos|>"));
        if (!targets.empty()) answers.push_back(tok.decode(targets));
        targets.clear();
      } else if (mask.at(i) == 1) {
        targets.push_back(ids.at(i));
      }
    }
    answers.push_back(tok.decode(targets));
    EXPECT_EQ(starts, summary[split]["conversations"].get<int64_t>());
    ASSERT_EQ(static_cast<int64_t>(answers.size()), starts);
    for (const auto& a : answers) {
      bool known = false;
      for (const auto& c : kColors) known |= a == "It is " + c + ".<|assistant_end|>";
      EXPECT_TRUE(known) << split << ": targets spell \"" << a << "\"";
    }
  }
}

TEST_F(ChatSft, LearnsTheAnswersNotTheNoise) {
  const std::string run = dir_->file("sft");
  // One conversation per row, as calibrated (its conversations of about 40 tokens would not
  // pack two to a 64-token row anyway; packing changes only their order, which moves this
  // 300-step val loss between about 0.09 and 0.16).
  auto r = sft(run, " --train.max_steps=300 --train.eval_batches=8 --data.chat.pack=false", "1e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "conversations")) << r.output;
  const auto steps = records(run, "loss");
  const auto evals = records(run, "val_loss");
  ASSERT_EQ(steps.size(), 300u);
  ASSERT_FALSE(evals.empty());
  const double first = steps.front()["loss"], val = evals.back()["val_loss"];
  // The answer ("It is", the color, ".", the end token) is a function of the user's item: the
  // masked loss can fall near 0; 6 noise words of 20 each cost ln 20 = 3.0 nats and could not.
  EXPECT_GT(first, 2.0);
  EXPECT_LT(val, 0.1) << "first loss " << first;
}

TEST_F(ChatSft, StoppedAndResumedEqualsUninterruptedBitwise) {
  const std::string a = dir_->file("straight"), b = dir_->file("resumed");
  // nanochat's chat_sft flags as aliases: --num_iterations is train.max_steps.
  // One conversation per row (the packed rows' resume: PackedRowsTrainResume...).
  ASSERT_EQ(sft(a, " --num_iterations=12 --data.chat.pack=false").exit_code, 0);
  ASSERT_EQ(sft(b, " --train.max_steps=12 --train.stop_at_step=5 --data.chat.pack=false").exit_code,
            0);
  auto r = sft(b, " --train.max_steps=12 --resume=auto --data.chat.pack=false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resumed from")) << r.output;
  expect_losses_match(a, b, 12, 0);
  for (const char* f : {"model.safetensors", "optim.rank0.safetensors"}) {
    EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/" + f),
              core::sha256_file_hex(b + "/checkpoints/latest/" + f))
        << f;
  }
}

TEST_F(ChatSft, LoraAndTwoRanksWithZeroTrain) {
  const std::string lora = dir_->file("lora");
  auto r = sft(lora,
               " --train.max_steps=30 --lora.rank=8 --lora.alpha=16"
               " --lora.targets=q,k,v,o,mlp_in,mlp_out",
               "3e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto l = records(lora, "loss");
  ASSERT_EQ(l.size(), 30u);
  double first = 0, last = 0;  // means of the first and the last 5 steps
  for (size_t i = 0; i < 5; ++i) {
    first += l[i]["loss"].get<double>() / 5;
    last += l[l.size() - 1 - i]["loss"].get<double>() / 5;
  }
  EXPECT_LT(last, first - 1.0);
  // 2 ranks with ZeRO-1 against 1 rank: the same conversations per step, the loss weighted by
  // the global count of targets; the rows' widths differ per rank, so equal to rounding.
  const std::string one = dir_->file("one"), two = dir_->file("two");
  ASSERT_EQ(sft(one, " --train.max_steps=6 --data.chat.pack=false").exit_code, 0);
  r = sft(two,
          " --train.max_steps=6 --nproc_per_node=2 --dist.backend=gloo --dist.zero=1"
          " --train.micro_batch_size=4 --data.chat.pack=false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_losses_match(one, two, 6, 1e-4);
}

// data.chat.pack: several conversations per row, document-masked. The run says how many rows
// the conversations packed into, learns, resumes bitwise, and 2 ranks equal 1, data-parallel
// or tensor-parallel.
TEST_F(ChatSft, PackedRowsTrainResumeBitwiseAndTwoRanksEqualOne) {
  const std::string a = dir_->file("packed_straight"), b = dir_->file("packed_resumed");
  auto r = sft(a, " --data.chat.pack=true --train.max_steps=12");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "packed into")) << r.output;
  EXPECT_TRUE(contains(r.output, "packed rows")) << r.output;
  ASSERT_EQ(sft(b, " --data.chat.pack=true --train.max_steps=12 --train.stop_at_step=5").exit_code,
            0);
  r = sft(b, " --data.chat.pack=true --train.max_steps=12 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_losses_match(a, b, 12, 0);
  const auto la = logged_losses(a);
  EXPECT_LT(la.back(), la.front());
  EXPECT_EQ(core::sha256_file_hex(a + "/checkpoints/latest/model.safetensors"),
            core::sha256_file_hex(b + "/checkpoints/latest/model.safetensors"));
  const std::string one = dir_->file("packed_one"), two = dir_->file("packed_two");
  ASSERT_EQ(sft(one, " --data.chat.pack=true --train.max_steps=6").exit_code, 0);
  r = sft(two,
          " --data.chat.pack=true --train.max_steps=6 --nproc_per_node=2 --dist.backend=gloo"
          " --train.micro_batch_size=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_losses_match(one, two, 6, 1e-4);
  // Tensor parallelism (dist.tp=2, one replica): the document layout is built from the whole
  // rows every TP rank reads, attention runs on whole rows after the all-gather: equal to one
  // process (loss within 1e-6 relative at ~7; measured 1e-7).
  const std::string tp = dir_->file("packed_tp2");
  r = sft(tp,
          " --data.chat.pack=true --train.max_steps=6 --nproc_per_node=2 --dist.backend=gloo"
          " --dist.tp=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tensor parallelism: tp=2")) << r.output;
  expect_losses_match(one, tp, 6, 7e-6);
}

// data.document_mask on the base's token windows (documents end with <|endoftext|>): the run
// trains, its loss differs from the unmasked run's (documents no longer see each other),
// resumes bitwise, and 2 ranks equal 1.
TEST_F(ChatSft, PretrainingWithDocumentMaskResumesBitwiseAndTwoRanksEqualOne) {
  auto base = [&](const std::string& run, const std::string& extra) {
    return run_command(lmtrain_binary() + " train" + chat_flags() + " --data.dir=" +
                       dir_->file("base_data") + " --run.dir=" + run + " --optim.lr=1e-2" + extra);
  };
  const std::string plain = dir_->file("doc_plain"), a = dir_->file("doc_straight"),
                    b = dir_->file("doc_resumed"), two = dir_->file("doc_two");
  ASSERT_EQ(base(plain, " --train.max_steps=6").exit_code, 0);
  ASSERT_EQ(base(a, " --data.document_mask=true --train.max_steps=6").exit_code, 0);
  ASSERT_EQ(
      base(b, " --data.document_mask=true --train.max_steps=6 --train.stop_at_step=3").exit_code,
      0);
  auto r = base(b, " --data.document_mask=true --train.max_steps=6 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = base(two,
           " --data.document_mask=true --train.max_steps=6 --nproc_per_node=2"
           " --dist.backend=gloo --train.micro_batch_size=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_losses_match(a, b, 6, 0);
  expect_losses_match(a, two, 6, 1e-4);
  const auto lp = logged_losses(plain), la = logged_losses(a);
  ASSERT_FALSE(lp.empty());
  EXPECT_NE(lp[0], la[0]);
  // Not with chat data, which packs with data.chat.pack instead.
  r = sft(dir_->file("doc_chat"), " --data.document_mask=true --train.max_steps=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "data.chat.pack")) << r.output;
}

// `eval --chat_tasks` on the fine-tuned model against the PyTorch reference
// (tests/fixtures/eval_reference.py chat): the same letter picked and the same greedy answer
// for every item, the same accuracies and ChatCORE.
TEST_F(ChatSft, ChatTasksEqualTheReference) {
  const std::string run = dir_->file("sft_eval");
  ASSERT_EQ(sft(run, " --train.max_steps=60", "1e-2").exit_code, 0);
  auto r = run_command(lmtrain_binary() + " export hf " + run + "/checkpoints/latest " +
                       dir_->file("sft_hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string tasks = dir_->file("chat_tasks/tasks.yaml");
  std::filesystem::create_directories(dir_->file("chat_tasks"));
  write_text(tasks,
             "chat_tasks:\n"
             "- {label: colors_mc, type: multiple_choice, dataset: mc.jsonl}\n"
             "- {label: colors_gen, type: gsm8k, dataset: gen.jsonl, max_new_tokens: 10}\n");
  std::ofstream mc(dir_->file("chat_tasks/mc.jsonl")), gen(dir_->file("chat_tasks/gen.jsonl"));
  for (size_t i = 0; i < kItems.size(); ++i) {
    mc << nlohmann::json{{"question", "color of " + kItems[i] + "?"},
                         {"choices", {kColors[i], kColors[(i + 1) % 6], kColors[(i + 2) % 6]}},
                         {"answer", 0}}
              .dump()
       << "\n";
    gen << nlohmann::json{{"question", "the cat color of " + kItems[i] + "?"},
                          {"answer", "It is " + kColors[i] + ".\n#### " + std::to_string(i)}}
               .dump()
        << "\n";
  }
  mc.close();
  gen.close();
  const std::string out = dir_->file("chat_tasks.json");
  r = run_command(lmtrain_binary() + " eval --checkpoint " + run + " --chat_tasks " + tasks +
                  " --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "ChatCORE:")) << r.output;
  EXPECT_TRUE(contains(r.output, "chat format nanochat")) << r.output;
  const auto got = nlohmann::json::parse(read_text(out));
  auto ref = run_command(lmtrain_python() + " " + source_dir() +
                         "/tests/fixtures/eval_reference.py chat " + dir_->file("sft_hf") + " " +
                         dir_->file("sft_data/tokenizer.json") + " " + tasks);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto want = check_result(ref);
  ASSERT_EQ(got["tasks"].size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    const auto &g = got["tasks"][t], &w = want["tasks"][t];
    ASSERT_EQ(g["scores"].size(), w["scores"].size());
    for (size_t i = 0; i < g["scores"].size(); ++i) {
      EXPECT_EQ(g["scores"][i]["correct"], w["scores"][i]["correct"]) << g["label"] << " " << i;
      const std::string ga = g["scores"][i]["answer"], wa = w["scores"][i]["answer"];
      if (!contains(ga, "\uFFFD") && !contains(wa, "\uFFFD")) {
        EXPECT_EQ(ga, wa) << g["label"] << " item " << i;
      }
    }
    EXPECT_EQ(g["accuracy"].get<double>(), w["accuracy"].get<double>()) << g["label"];
    EXPECT_NEAR(g["baseline"].get<double>(), w["baseline"].get<double>(), 1e-12);
  }
  EXPECT_NEAR(got["chatcore"].get<double>(), want["chatcore"].get<double>(), 1e-12);
  EXPECT_NEAR(got["tasks"][0]["baseline"].get<double>(), 1.0 / 3, 1e-12);
  // On 2 ranks (each scores half the items, the answers gathered): the same JSON.
  const std::string out2 = dir_->file("chat_tasks_two.json");
  r = run_command(lmtrain_binary() +
                  " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) +
                  " -- eval --checkpoint " + run + " --chat_tasks " + tasks + " --json " + out2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got2 = nlohmann::json::parse(read_text(out2));
  EXPECT_EQ(got2["tasks"], got["tasks"]);
  EXPECT_EQ(got2["chatcore"], got["chatcore"]);
}

// The proof: SFT on conversations whose answer is a lookup (an item's code, "#### N"),
// then held-out prompts (new noise) through `eval --chat_tasks`: the fine-tuned model answers
// most of them, the base none (chance is 0 for a generated answer).
TEST_F(ChatSft, HeldOutChatAccuracyRisesFarAboveTheBase) {
  const std::vector<int> codes = {3, 7, 1, 9, 4, 2};
  std::mt19937 rng(11);
  auto noise = [&] {
    std::string n;
    for (int k = 0; k < 6; ++k) n += kNoise[rng() % kNoise.size()] + " ";
    return n;
  };
  {
    std::ofstream f(dir_->file("codes.jsonl"));
    for (int i = 0; i < 400; ++i) {
      const size_t item = rng() % kItems.size();
      f << nlohmann::json{{"messages",
                           {{{"role", "user"},
                             {"content", noise() + "code of " + kItems[item] + "?"}},
                            {{"role", "assistant"},
                             {"content", "#### " + std::to_string(codes[item])}}}}}
               .dump()
        << "\n";
    }
    std::filesystem::create_directories(dir_->file("codes_eval"));
    std::ofstream g(dir_->file("codes_eval/gen.jsonl"));
    for (int i = 0; i < 30; ++i) {
      const size_t item = static_cast<size_t>(i) % kItems.size();
      g << nlohmann::json{{"question", noise() + "code of " + kItems[item] + "?"},
                          {"answer", "#### " + std::to_string(codes[item])}}
               .dump()
        << "\n";
    }
  }
  write_text(dir_->file("codes_eval/tasks.yaml"),
             "chat_tasks:\n- {label: codes, type: gsm8k, dataset: gen.jsonl, max_new_tokens: 6}\n");
  auto r = run_command(lmtrain_binary() + " prepare --chat --input " + dir_->file("codes.jsonl") +
                       " --tokenizer " + dir_->file("base_data/tokenizer.json") + " --output " +
                       dir_->file("codes_data") + " --val_fraction 0.1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " train" + chat_flags() +
                  " --data.dir=" + dir_->file("codes_data") + " --data.format=chat --run.dir=" +
                  dir_->file("codes_sft") + " --model.init_from=" + dir_->file("base") +
                  " --optim.lr=1e-2 --optim.warmup_steps=2 --train.max_steps=1500");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto accuracy = [&](const std::string& run) {
    const std::string out = run + "_codes.json";
    auto e =
        run_command(lmtrain_binary() + " eval --checkpoint " + run + " --chat_tasks " +
                    dir_->file("codes_eval/tasks.yaml") + " --chat_format nanochat --json " + out);
    EXPECT_EQ(e.exit_code, 0) << e.output;
    return nlohmann::json::parse(read_text(out))["tasks"][0]["accuracy"].get<double>();
  };
  const double base = accuracy(dir_->file("base")), sft = accuracy(dir_->file("codes_sft"));
  EXPECT_EQ(base, 0.0);
  EXPECT_GE(sft, 0.8) << "base " << base;
}

TEST_F(ChatSft, RefusesWhatItCannotTrain) {
  // Plain token data as chat data, and chat with a stream.
  auto r = run_command(
      lmtrain_binary() + " train" + chat_flags() + " --data.dir=" + dir_->file("base_data") +
      " --data.format=chat --run.dir=" + dir_->file("refused") + " --train.max_steps=2");
  expect_refused(r, {"prepare --chat", "train_mask"});
  r = run_command(lmtrain_binary() + " prepare --chat --input " + dir_->file("convs.jsonl") +
                  " --output " + dir_->file("no_tok"));
  expect_refused(r, {"--tokenizer"});
  r = run_command(lmtrain_binary() + " prepare --chat --input " + dir_->file("convs.jsonl") +
                  " --tokenizer " + dir_->file("base_data/tokenizer.json") +
                  " --chat_format llama3" + " --output " + dir_->file("wrong_format"));
  expect_refused(r, {"<|start_header_id|>", "llama3"});
}

}  // namespace
}  // namespace lmtrain::testing

namespace lmtrain::testing {
namespace {

// An HF model's tokenizer: `prepare --chat` finds Qwen3's format in the tokenizer_config.json
// beside it, and refuses a template it does not render, naming the model's directory.
TEST(ChatPrepareHf, FindsTheFormatOrRefusesNamingTheModel) {
  TempDir dir("lmtrain_chat_hf");
  const std::string model = dir.file("Qwen3-tiny");
  auto r = run_command(lmtrain_python() + " " + source_dir() +
                       "/tests/fixtures/chat_check.py render qwen3 " + model + " --count 60");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " prepare --chat --input " + model +
                  "/conversations.jsonl --tokenizer " + model + "/tokenizer.json --output " +
                  dir.file("data") + " --val_fraction 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "(qwen3)")) << r.output;
  const auto summary = nlohmann::json::parse(read_text(dir.file("data/chat.json")));
  EXPECT_EQ(summary["format"], "qwen3");
  EXPECT_EQ(summary["train"]["conversations"].get<int>() +
                summary["val"]["conversations"].get<int>() +
                summary["skipped_without_targets"].get<int>(),
            60);
  EXPECT_TRUE(std::filesystem::exists(dir.file("data/tokenizer_config.json")));
  // Llama 3.1's date header is not Llama 3's rendering: refused, never guessed.
  auto config = nlohmann::json::parse(read_text(model + "/tokenizer_config.json"));
  config["chat_template"] =
      "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December "
      "2023' }}{% for m in messages %}{{ m['content'] | trim + '<|eot_id|>' }}{% endfor %}";
  write_text(model + "/tokenizer_config.json", config.dump());
  r = run_command(lmtrain_binary() + " prepare --chat --input " + model +
                  "/conversations.jsonl --tokenizer " + model + "/tokenizer.json --output " +
                  dir.file("data31"));
  expect_refused(r, {"Qwen3-tiny", "Llama 3.1"});
}

}  // namespace
}  // namespace lmtrain::testing
