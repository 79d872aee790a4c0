// `lmtrain serve` and `lmtrain chat` with real clients (issue 41): a tiny base model fine-tuned
// on conversations whose answer is a lookup ("color of sky?" -> "It is blue."), then served.
// The same greedy answers come back from `lmtrain chat --prompt`, the `openai` Python package
// (plain, streamed, and from 16 threads at once) and the chat page in headless Chromium; the
// answers are right (the 16 concurrent clients through continuous batching, and through static
// batching); a client that hangs up mid-stream frees its row; the server survives a table of bad
// and hostile requests (raw sockets) and answers SIGTERM by stopping.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "cli/chat_model.h"
#include "core/runtime.h"
#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

const std::vector<std::string> kLookupItems = {"apple", "sky", "grass", "snow", "coal", "sun"};
const std::vector<std::string> kLookupColors = {"red", "blue", "green", "white", "black", "yellow"};
constexpr const char* kKey = "test-key-123";

const std::vector<std::string> kLookupNoise = {"the",  "a",    "old", "man",  "sea",
                                               "ran",  "big",  "cat", "dog",  "hill",
                                               "rock", "tree", "day", "night"};

// Noise words first, so the conversations differ (prepare splits by content) and the answer
// must come from the item alone.
std::string question(size_t item, const std::string& noise = "the big") {
  return noise + " color of " + kLookupItems[item] + "?";
}

// A server in the background: started with --port 0, its port read from its first line.
class Server {
 public:
  Server(const std::string& checkpoint, const std::string& log, const std::string& key,
         const std::string& extra = "") {
    const auto r = run_command(lmtrain_binary() + " serve --checkpoint " + checkpoint +
                               " --port 0 --threads 1" + (key.empty() ? "" : " --api_key " + key) +
                               extra + " > " + log + " 2>&1 & echo $!");
    pid_ = std::stoi(r.output);
    const std::regex url("http://127\\.0\\.0\\.1:([0-9]+)/");
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // loading the model takes a moment
      std::smatch m;
      const std::string text = read_text(log);
      if (std::regex_search(text, m, url)) port_ = std::stoi(m[1]);
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~Server() {
    if (running()) ::kill(pid_, SIGKILL);
  }
  bool running() const { return ::kill(pid_, 0) == 0 && !zombie(); }
  bool zombie() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string s;
    std::getline(stat, s);
    return s.empty() || s.find(") Z") != std::string::npos;
  }
  // SIGTERM; true when the process has gone within 20 s.
  bool stop() {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200 && running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return !running();
  }
  int port() const { return port_; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int pid_ = 0;
  int port_ = 0;
};

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_serve");
    const std::string corpus = write_synthetic_corpus(dir_->path(), 200, 1);
    // Room in the context for the page's two-question conversation (block 128).
    const std::string flags = tiny_train_flags() + " --model.block_size=128 --data.seq_len=64";
    auto r = run_command(lmtrain_binary() + " prepare --input " + corpus + " --output " +
                         dir_->file("base_data") +
                         " --vocab_size 420 --doc_separator % --chat_tokens --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(lmtrain_binary() + " train" + flags + " --data.dir=" + dir_->file("base_data") +
                    " --run.dir=" + dir_->file("base") + " --train.max_steps=10");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::mt19937 rng(7);
    std::ofstream f(dir_->file("convs.jsonl"));
    for (int i = 0; i < 300; ++i) {
      const size_t item = rng() % kLookupItems.size();
      std::string noise = kLookupNoise[rng() % kLookupNoise.size()];
      for (int k = 0; k < 3; ++k) noise += " " + kLookupNoise[rng() % kLookupNoise.size()];
      nlohmann::json messages = nlohmann::json::array(
          {{{"role", "user"}, {"content", question(item, noise)}},
           {{"role", "assistant"}, {"content", "It is " + kLookupColors[item] + "."}}});
      f << nlohmann::json{{"messages", messages}}.dump() << "\n";
    }
    f.close();
    r = run_command(lmtrain_binary() + " prepare --chat --input " + dir_->file("convs.jsonl") +
                    " --tokenizer " + dir_->file("base_data/tokenizer.json") + " --output " +
                    dir_->file("sft_data") + " --val_fraction 0.1 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(lmtrain_binary() + " train" + flags + " --data.dir=" + dir_->file("sft_data") +
                    " --data.format=chat --run.dir=" + dir_->file("sft") +
                    " --model.init_from=" + dir_->file("base") +
                    " --optim.lr=1e-2 --optim.warmup_steps=2 --train.max_steps=1500");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
};
TempDir* ServeTest::dir_ = nullptr;

std::vector<std::string> strings(const nlohmann::json& j) {
  return j.get<std::vector<std::string>>();
}

TEST_F(ServeTest, TheSameRightAnswersComeBackThroughChatTheOpenAiClientAndThePage) {
  // The terminal chat's greedy answers are the reference.
  std::vector<std::string> want;
  int right = 0;
  for (size_t i = 0; i < kLookupItems.size(); ++i) {
    const auto r = run_command(lmtrain_binary() + " chat --checkpoint " + dir_->file("sft") +
                               " --temperature 0 --max_tokens 24 --threads 1 --prompt \"" +
                               question(i) + "\"");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    want.push_back(r.output.substr(0, r.output.find_last_not_of('\n') + 1));
    right += want.back() == "It is " + kLookupColors[i] + ".";
  }
  // Chance is 1 in 6 (the base model answers none).
  EXPECT_GE(right, 4) << "the fine-tuned model should know most colors";

  Server server(dir_->file("sft"), dir_->file("serve.log"), kKey, " --max_batch 8");
  ASSERT_GT(server.port(), 0) << read_text(dir_->file("serve.log"));
  std::string questions;
  for (size_t i = 0; i < kLookupItems.size(); ++i) questions += " \"" + question(i) + "\"";
  auto r =
      run_command(lmtrain_python() + " " + source_dir() + "/tests/serve/openai_client_check.py " +
                  server.base() + "/v1 " + kKey + " 16" + questions);
  ASSERT_EQ(r.exit_code, 0) << r.output << read_text(dir_->file("serve.log"));
  const auto got = check_result(r);
  EXPECT_EQ(strings(got["models"]), std::vector<std::string>{"sft"});
  EXPECT_EQ(strings(got["plain"]), want);
  EXPECT_EQ(strings(got["streamed"]), want);
  for (const auto& f : got["finish"]) EXPECT_EQ(f, "stop");
  EXPECT_GT(got["usage"]["prompt_tokens"].get<int>(), 3);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(got["concurrent"][i], want[i % want.size()]) << "concurrent client " << i;
  }
  for (const auto& c : got["chunks"]) EXPECT_GE(c.get<int>(), 1) << got.dump();
  {  // The same answers through static batching, which the policies that cannot join rows use.
    Server fixed(dir_->file("sft"), dir_->file("serve_static.log"), kKey,
                 " --max_batch 8 --batching static");
    ASSERT_GT(fixed.port(), 0) << read_text(dir_->file("serve_static.log"));
    const auto s =
        run_command(lmtrain_python() + " " + source_dir() + "/tests/serve/openai_client_check.py " +
                    fixed.base() + "/v1 " + kKey + " 16" + questions);
    ASSERT_EQ(s.exit_code, 0) << s.output << read_text(dir_->file("serve_static.log"));
    const auto static_got = check_result(s);
    EXPECT_EQ(strings(static_got["streamed"]), want);
    for (size_t i = 0; i < 16; ++i) {
      EXPECT_EQ(static_got["concurrent"][i], want[i % want.size()]) << "static, client " << i;
    }
    EXPECT_TRUE(fixed.stop());
    EXPECT_TRUE(contains(read_text(dir_->file("serve_static.log")), " batches (largest"))
        << read_text(dir_->file("serve_static.log"));
  }

  std::string browser;
  for (const char* name : {"chromium-headless-shell", "chromium"}) {
    if (browser.empty() && run_command(std::string("command -v ") + name).exit_code == 0) {
      browser = name;
    }
  }
  ASSERT_FALSE(browser.empty()) << "scripts/setup.sh installs chromium-headless-shell";
  // The page asks for the key once and keeps it: served without one here.
  Server open(dir_->file("sft"), dir_->file("serve_open.log"), "");
  ASSERT_GT(open.port(), 0) << read_text(dir_->file("serve_open.log"));
  r = run_command(lmtrain_python() + " " + source_dir() + "/tests/serve/chat_page_check.py " +
                  browser + " " + open.base() + "/ " + dir_->file("page.png") + " \"" +
                  question(1) + "\" \"" + question(2) + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto page = check_result(r);
  EXPECT_TRUE(page["errors"].empty()) << page.dump();
  ASSERT_EQ(page["answers"].size(), 2u) << page.dump();
  EXPECT_EQ(page["answers"][0]["text"], want[1]) << page.dump();
  EXPECT_EQ(page["answers"][1]["state"], "done") << page.dump();
  EXPECT_TRUE(std::filesystem::file_size(dir_->file("page.png")) > 5000);
  // The README's screenshot (docs/chat_page.png) is this page: LMTRAIN_SCREENSHOT=PATH keeps it.
  if (const char* keep = std::getenv("LMTRAIN_SCREENSHOT")) {
    std::filesystem::copy_file(dir_->file("page.png"), keep,
                               std::filesystem::copy_options::overwrite_existing);
  }
  EXPECT_TRUE(server.stop()) << "SIGTERM stops the server";
  EXPECT_TRUE(open.stop());
  EXPECT_TRUE(contains(read_text(dir_->file("serve.log")), "(continuous batching)"))
      << read_text(dir_->file("serve.log"));
}

TEST_F(ServeTest, AClientThatHangsUpMidStreamFreesItsRow) {
  // A model barely trained (2 steps) with room for a long answer, sampled (seed 7) from its
  // near-uniform predictions. The request bans the end of the turn (logit_bias -100 on it), so
  // the answer runs its whole 2000 tokens unless the hang-up stops it: it cannot end by chance
  // before the client leaves (it did, 1 run in many, when only the end token's odds kept it
  // going). Its vocabulary is the tokenizer's (no padding ids it could emit and nothing could
  // decode).
  const auto vocab =
      nlohmann::json::parse(read_text(dir_->file("base_data/prepare.json")))["vocab_size"];
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() +
                       " --model.block_size=2048 --model.vocab_size=" + vocab.dump() +
                       " --data.dir=" + dir_->file("base_data") +
                       " --run.dir=" + dir_->file("long") + " --train.max_steps=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto end_id = cli::load_chat_model(dir_->file("long"), "auto", core::Runtime::cpu())
                          .renderer->end_token();  // the token the server stops at
  Server server(dir_->file("long"), dir_->file("leave.log"), kKey, " --max_tokens 2000");
  ASSERT_GT(server.port(), 0) << read_text(dir_->file("leave.log"));
  r = run_command(lmtrain_python() + " " + source_dir() +
                  "/tests/serve/leave_mid_stream.py 127.0.0.1 " + std::to_string(server.port()) +
                  " " + kKey + " 2000 " + std::to_string(end_id));
  ASSERT_EQ(r.exit_code, 0) << r.output << read_text(dir_->file("leave.log"));
  const auto got = check_result(r);
  ASSERT_TRUE(got["first_event"].is_object()) << got.dump();
  EXPECT_EQ(got["running_when_closed"], 1) << "the answer ended before the hang-up: " << got.dump();
  EXPECT_EQ(got["health"]["running"], 0) << got.dump();
  EXPECT_EQ(got["health"]["cancelled"], 1) << got.dump();
  EXPECT_TRUE(server.stop());
  EXPECT_TRUE(contains(read_text(dir_->file("leave.log")), "1 cancelled"))
      << read_text(dir_->file("leave.log"));
}

TEST_F(ServeTest, BadAndHostileRequestsGetErrorsAndNeverStopTheServer) {
  Server server(dir_->file("sft"), dir_->file("hostile.log"), kKey,
                " --max_body_kb 64 --max_tokens 64 --timeout_s 2");
  ASSERT_GT(server.port(), 0) << read_text(dir_->file("hostile.log"));
  const auto r = run_command(lmtrain_python() + " " + source_dir() +
                             "/tests/serve/hostile_requests.py 127.0.0.1 " +
                             std::to_string(server.port()) + " " + kKey + " 65536 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = check_result(r);
  ASSERT_GE(got["cases"].size(), 20u);
  for (const auto& c : got["cases"]) {
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    EXPECT_TRUE(c["alive"].get<bool>()) << c.dump();
  }
  EXPECT_TRUE(server.running());
  EXPECT_TRUE(server.stop());
}

TEST_F(ServeTest, FlagsAreCheckedBeforeTheModelLoads) {
  expect_refused(run_command(lmtrain_binary() + " serve"), {"--checkpoint is required"});
  expect_refused(
      run_command(lmtrain_binary() + " serve --checkpoint " + dir_->file("sft") + " --port 70000"),
      {"--port"});
  expect_refused(run_command(lmtrain_binary() + " serve --checkpoint " + dir_->file("sft") +
                             " --chat_format klingon --port 0"),
                 {"klingon"});
  expect_refused(run_command(lmtrain_binary() + " serve --checkpoint " + dir_->file("sft") +
                             " --batching dynamic --port 0"),
                 {"--batching dynamic", "continuous or static"});
  const auto help = run_command(lmtrain_binary() + " serve --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.output, "/v1/chat/completions")) << help.output;
}

}  // namespace
}  // namespace lmtrain::testing
