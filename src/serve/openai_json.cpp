#include "serve/openai_json.h"

#include <nlohmann/json.hpp>

namespace lmtrain::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

const char* finish_reason(infer::StopReason stop) {
  return stop == infer::StopReason::kEot ? "stop" : "length";
}

std::string error_json(const std::string& message, const std::string& type,
                       const std::string& param, int status) {
  json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", status}};
  return dump(json{{"error", e}});
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, infer::StopReason stop, const Usage& usage) {
  json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", text}}},
                 {"finish_reason", finish_reason(stop)},
                 {"logprobs", nullptr}};
  return dump(json{{"id", id},
                   {"object", "chat.completion"},
                   {"created", created},
                   {"model", model},
                   {"choices", json::array({choice})},
                   {"usage", usage_json(usage)}});
}

std::string chunk_json(const std::string& id, int64_t created, const std::string& model,
                       const std::optional<std::string>& text, bool first,
                       std::optional<infer::StopReason> finish, const std::optional<Usage>& usage) {
  json j = {
      {"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}};
  if (usage) {
    j["choices"] = json::array();
    j["usage"] = usage_json(*usage);
    return dump(j);
  }
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (text) delta["content"] = *text;
  json choice = {{"index", 0},
                 {"delta", delta},
                 {"finish_reason", finish ? json(finish_reason(*finish)) : json(nullptr)},
                 {"logprobs", nullptr}};
  j["choices"] = json::array({choice});
  return dump(j);
}

std::string models_json(const std::string& model, int64_t created) {
  return dump(json{
      {"object", "list"},
      {"data",
       json::array({json{
           {"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "lmtrain"}}})}});
}

}  // namespace lmtrain::serve
