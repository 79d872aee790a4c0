// `lmtrain serve`'s request parser, answers and streaming pieces: what a client sends is read
// exactly or refused with a 4xx naming the parameter; the answer JSON is OpenAI's shape; streamed
// text is cut at whole characters only.
#include "serve/chat_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/http_server.h"
#include "serve/openai_json.h"

namespace lmtrain::serve {
namespace {

using nlohmann::json;

TEST(ChatRequest, ReadsTheParametersAClientSends) {
  const auto r = parse_chat_request(
      R"({"model": "m", "messages": [{"role": "developer", "content": "be brief"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "é"}]},
          {"role": "assistant", "content": "ok", "name": "bot"}, {"role": "user", "content": ""}],
          "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 7,
          "temperature": 0, "top_p": 0.5, "top_k": 3, "seed": 11, "n": 1, "user": "u",
          "frequency_penalty": 0, "logprobs": false, "logit_bias": {"9": 2.5, "3": -100}})",
      {});
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "aé");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, 11u);
  const std::vector<std::pair<int64_t, float>> bias = {{3, -100.0f}, {9, 2.5f}};  // ids ascending
  EXPECT_EQ(r.logit_bias, bias);
  const auto d = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})", {});
  EXPECT_FALSE(d.stream);
  EXPECT_FALSE(d.max_tokens.has_value());
  EXPECT_EQ(d.temperature, 1.0);  // OpenAI's default
}

TEST(ChatRequest, EveryBadRequestIsA400NamingTheParameter) {
  RequestLimits limits;
  limits.max_messages = 3;
  limits.max_content_bytes = 10;
  limits.max_tokens = 50;
  limits.vocab_size = 100;
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},
      {"not json", ""},
      {"[1, 2]", ""},
      {"{\"messages\": [" + user + "], \"messages\": []}", ""},  // a key twice
      {"{}", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {"{\"messages\": [" + user + "," + user + "," + user + "," + user + "]}", "messages"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": 3, "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "0123456789x"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls"},
      {"{\"messages\": [" + user + "], \"max_tokens\": 0}", "max_tokens"},
      {"{\"messages\": [" + user + "], \"max_tokens\": 51}", "max_tokens"},
      {"{\"messages\": [" + user + "], \"max_tokens\": 1.5}", "max_tokens"},
      {"{\"messages\": [" + user + "], \"max_tokens\": 18446744073709551615}", "max_tokens"},
      {"{\"messages\": [" + user + "], \"max_tokens\": 5, \"max_completion_tokens\": 5}",
       "max_completion_tokens"},
      {"{\"messages\": [" + user + "], \"temperature\": -0.1}", "temperature"},
      {"{\"messages\": [" + user + "], \"temperature\": \"hot\"}", "temperature"},
      {"{\"messages\": [" + user + "], \"top_p\": 0}", "top_p"},
      {"{\"messages\": [" + user + "], \"n\": 2}", "n"},
      {"{\"messages\": [" + user + "], \"stream\": \"yes\"}", "stream"},
      {"{\"messages\": [" + user + "], \"stop\": [\"\\n\"]}", "stop"},
      {"{\"messages\": [" + user + "], \"tools\": []}", "tools"},
      {"{\"messages\": [" + user + "], \"presence_penalty\": 1}", "presence_penalty"},
      {"{\"messages\": [" + user + "], \"logprobs\": true}", "logprobs"},
      {"{\"messages\": [" + user + "], \"stream_options\": {\"x\": 1}}", "stream_options.x"},
      {"{\"messages\": [" + user + "], \"logit_bias\": [1]}", "logit_bias"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"x\": 1}}", "logit_bias.x"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"-1\": 1}}", "logit_bias.-1"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"100\": 1}}", "logit_bias.100"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"5\": 100.5}}", "logit_bias.5"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"5\": \"x\"}}", "logit_bias.5"},
      {"{\"messages\": [" + user + "], \"logit_bias\": {\"5\": 1, \"05\": 2}}", "logit_bias"},
  };
  for (const auto& [body, param] : cases) {
    try {
      parse_chat_request(body, limits);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
      if (!param.empty()) {
        EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
      }
    }
  }
}

TEST(ChatRequest, AnswersHaveOpenAisShape) {
  const auto whole =
      json::parse(completion_json("id1", 5, "m", "hello", infer::StopReason::kEot, Usage{3, 2}));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["usage"]["total_tokens"], 5);
  const auto first =
      json::parse(chunk_json("id1", 5, "m", std::string("he"), true, std::nullopt, std::nullopt));
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const auto last = json::parse(
      chunk_json("id1", 5, "m", std::nullopt, false, infer::StopReason::kContext, std::nullopt));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  const auto usage =
      json::parse(chunk_json("id1", 5, "m", std::nullopt, false, std::nullopt, Usage{1, 1}));
  EXPECT_TRUE(usage["choices"].empty());
  // Bytes that are not UTF-8 go out replaced, never as invalid JSON.
  const auto bad =
      json::parse(completion_json("i", 1, "m", "a\xff", infer::StopReason::kLength, {}));
  EXPECT_EQ(bad["choices"][0]["message"]["content"], "a\xEF\xBF\xBD");
  const auto err = json::parse(error_json("no", "invalid_request_error", "top_p", 400));
  EXPECT_EQ(err["error"]["param"], "top_p");
  EXPECT_EQ(err["error"]["code"], 400);
}

TEST(ChatRequest, StreamedTextIsCutAtWholeCharacters) {
  const std::string e_acute = "\xC3\xA9", euro = "\xE2\x82\xAC", smile = "\xF0\x9F\x98\x80";
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("ab"), 2u);
  EXPECT_EQ(complete_utf8_prefix("a" + e_acute), 3u);
  EXPECT_EQ(complete_utf8_prefix("a" + e_acute.substr(0, 1)), 1u);
  EXPECT_EQ(complete_utf8_prefix("a" + euro.substr(0, 2)), 1u);
  EXPECT_EQ(complete_utf8_prefix("a" + smile.substr(0, 3)), 1u);
  EXPECT_EQ(complete_utf8_prefix("a" + smile), 5u);
  EXPECT_EQ(complete_utf8_prefix("a\x80\x80\x80\x80"), 5u);  // not UTF-8: nothing to wait for
}

}  // namespace
}  // namespace lmtrain::serve
