#include "data/chat/chat_prepare.h"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/output_dir.h"
#include "data/bpe_tokenizer.h"
#include "data/chat/chat_render.h"
#include "data/document_hash.h"
#include "data/token_shard.h"

namespace lmtrain::data::chat {
namespace fs = std::filesystem;
namespace {

std::string config_beside(const std::string& tokenizer_path) {
  return (fs::path(tokenizer_path).parent_path() / "tokenizer_config.json").string();
}

ChatFormat resolve_format(const ChatPrepareOptions& opt, const BpeTokenizer& tok) {
  if (opt.format != "auto") {
    const auto f = chat_format_from_name(opt.format);
    if (!f) {
      throw UsageError("--chat_format " + opt.format +
                       " is not one of auto, nanochat, chatml, qwen2.5, qwen3, llama3");
    }
    return *f;
  }
  const std::string config = config_beside(opt.tokenizer);
  std::error_code ec;
  if (fs::is_regular_file(config, ec)) {
    return chat_format_from_tokenizer_config(config,
                                             fs::path(opt.tokenizer).parent_path().string());
  }
  if (tok.special_id(nanochat_special_tokens().front())) return *chat_format_from_name("nanochat");
  throw UsageError("--chat_format auto: " + opt.tokenizer +
                   " has no tokenizer_config.json beside it (an HF model's chat template) and "
                   "not nanochat's tokens (`lmtrain prepare --chat_tokens` trains a tokenizer "
                   "with them): give --chat_format");
}

// One split's two shards.
struct SplitWriter {
  ShardWriter ids, mask;
  int64_t conversations = 0, tokens = 0, targets = 0;
  SplitWriter(const std::string& dir, const std::string& split, int dtype, const std::string& hash)
      : ids(dir + "/" + split + ".bin", dtype, hash),
        mask(dir + "/" + split + "_mask.bin", 2, hash) {}
  void add(const RenderedChat& r) {
    std::vector<uint32_t> m(r.mask.begin(), r.mask.end());
    m[0] = 2;  // the conversation's first id (context in every format)
    ids.append(r.ids);
    mask.append(m);
    ++conversations;
    tokens += static_cast<int64_t>(r.ids.size());
    targets += r.targets();
  }
};

}  // namespace

ChatPrepareResult run_chat_prepare(const ChatPrepareOptions& opt) {
  if (opt.inputs.empty()) throw UsageError("prepare --chat: --input is required (JSONL files)");
  if (opt.tokenizer.empty()) {
    throw UsageError(
        "prepare --chat encodes with a given tokenizer: --tokenizer FILE (the "
        "model's tokenizer.json, or one `lmtrain prepare --chat_tokens` trained)");
  }
  if (!(opt.val_fraction > 0 && opt.val_fraction < 1)) {
    throw UsageError("--val_fraction must be in (0, 1)");
  }
  std::error_code ec;
  for (const auto& in : opt.inputs) {
    if (!fs::is_regular_file(in, ec)) throw UsageError("--input " + in + " is not a file");
  }
  if (!fs::is_regular_file(opt.tokenizer, ec)) {
    throw UsageError("--tokenizer " + opt.tokenizer + " is not a file");
  }
  const BpeTokenizer tok = BpeTokenizer::load(opt.tokenizer);
  const ChatFormat format = resolve_format(opt, tok);
  const ChatRenderer renderer(format, tok, opt.tokenizer);

  core::OutputDirOptions oopt;
  oopt.command = "prepare --chat";
  oopt.inputs = opt.inputs;
  oopt.inputs.push_back(opt.tokenizer);
  oopt.overwrite = opt.overwrite;
  core::OutputDir out(opt.output_dir, oopt);
  const std::string dir = out.staging();
  fs::copy_file(opt.tokenizer, dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
  if (BpeTokenizer::load_hf(dir + "/tokenizer.json").hash() != tok.hash()) {
    tok.save_hf(dir + "/tokenizer.json");  // GPT-2's files: written in HF form
  }
  const std::string config = config_beside(opt.tokenizer);
  if (fs::is_regular_file(config, ec)) {
    fs::copy_file(config, dir + "/tokenizer_config.json", fs::copy_options::overwrite_existing);
  }

  const int dtype = shard_dtype_for_vocab(tok.vocab_size());
  SplitWriter train(dir, "train", dtype, tok.hash()), val(dir, "val", dtype, tok.hash());
  ChatPrepareResult res;
  res.format = describe_chat_format(format);
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& path : opt.inputs) {
    for_each_conversation(path, opt.max_line_bytes, [&](Conversation&& c, uint64_t line) {
      const std::string where = path + ":" + std::to_string(line);
      const RenderedChat r = renderer.render(c, where);
      if (r.targets() == 0) {
        ++res.skipped_without_targets;
        return;
      }
      const uint64_t h = document_hash(conversation_to_jsonl(c));
      (is_val_document(h, opt.seed, opt.val_fraction) ? val : train).add(r);
    });
    inputs.push_back({{"path", path}, {"size", fs::file_size(path)}});
  }
  if (train.conversations == 0 || val.conversations == 0) {
    throw UsageError(log::format(
        "prepare --chat: %lld training and %lld validation conversations: each split needs at "
        "least one (more conversations, or another --val_fraction)",
        (long long)train.conversations, (long long)val.conversations));
  }
  train.ids.finish();
  train.mask.finish();
  val.ids.finish();
  val.mask.finish();
  res.train_conversations = train.conversations;
  res.val_conversations = val.conversations;
  res.train_tokens = train.tokens;
  res.val_tokens = val.tokens;
  res.train_targets = train.targets;
  res.val_targets = val.targets;
  const nlohmann::json summary = {
      {"format", chat_format_name(format.kind)},
      {"default_system", format.default_system},
      {"tokenizer_hash", tok.hash()},
      {"val_fraction", opt.val_fraction},
      {"seed", opt.seed},
      {"inputs", inputs},
      {"train",
       {{"conversations", train.conversations},
        {"tokens", train.tokens},
        {"targets", train.targets}}},
      {"val",
       {{"conversations", val.conversations}, {"tokens", val.tokens}, {"targets", val.targets}}},
      {"skipped_without_targets", res.skipped_without_targets}};
  core::write_file_atomic(dir + "/chat.json", summary.dump(2) + "\n");
  out.commit();
  return res;
}

}  // namespace lmtrain::data::chat
