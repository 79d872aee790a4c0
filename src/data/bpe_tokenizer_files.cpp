// BpeTokenizer's file formats: GPT-2's encoder.json + vocab.bpe, Hugging Face tokenizer.json
// (read and write). Kept apart from the encoder itself; uses only its public interface.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_level.h"

namespace lmtrain::data {

// ---------------------------------------------------------------------------------------------
// Files. Vocabulary strings in the files use the GPT-2 byte alphabet; tokens that are not in
// that alphabet (e.g. special tokens with unusual characters) are kept as their raw UTF-8.

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open tokenizer file " + path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error("tokenizer file " + path + " is not valid JSON: " + e.what());
  }
}

std::string token_from_file(const std::string& s) {
  std::string bytes;
  return unicode_to_bytes(s, &bytes) ? bytes : s;
}

// Vocabulary as read from a file: id -> file string, with a reverse map for merges.
struct FileVocab {
  std::vector<std::string> strings;
  std::vector<bool> present;
  std::unordered_map<std::string, uint32_t> ids;

  void add(const std::string& path, const std::string& s, int64_t id) {
    if (id < 0 || id > INT32_MAX) {
      throw Error("tokenizer file " + path + ": token " + s + " has invalid id " +
                  std::to_string(id));
    }
    if (static_cast<size_t>(id) >= strings.size()) {
      strings.resize(id + 1);
      present.resize(id + 1, false);
    }
    if (present[id] && strings[id] != s) {
      throw Error("tokenizer file " + path + ": id " + std::to_string(id) + " used by both " +
                  strings[id] + " and " + s);
    }
    strings[id] = s;
    present[id] = true;
    ids.emplace(s, static_cast<uint32_t>(id));
  }

  uint32_t id_of(const std::string& path, const std::string& where, const std::string& s) const {
    auto it = ids.find(s);
    if (it == ids.end()) {
      throw Error("tokenizer file " + path + ": " + where + " uses token '" + s +
                  "' that is not in the vocabulary");
    }
    return it->second;
  }

  std::vector<std::string> tokens(const std::string& path) const {
    std::vector<std::string> out(strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      if (!present[i]) {
        throw Error("tokenizer file " + path + ": vocabulary has no token with id " +
                    std::to_string(i) + " (ids must be contiguous)");
      }
      out[i] = token_from_file(strings[i]);
    }
    return out;
  }
};

void read_vocab_object(const std::string& path, const json& obj, FileVocab* vocab) {
  if (!obj.is_object()) throw Error("tokenizer file " + path + ": vocabulary is not an object");
  for (const auto& [s, id] : obj.items()) {
    if (!id.is_number_integer()) {
      throw Error("tokenizer file " + path + ": id of token '" + s + "' is not an integer");
    }
    vocab->add(path, s, id.get<int64_t>());
  }
}

BpeTokenizer build(const std::string& path, std::vector<std::string> tokens,
                   std::vector<BpeTokenizer::Merge> merges, std::vector<SpecialToken> specials,
                   BpeOptions options) {
  try {
    return BpeTokenizer(std::move(tokens), std::move(merges), std::move(specials),
                        std::move(options));
  } catch (const Error& e) {
    throw Error("tokenizer file " + path + ": " + e.what());
  }
}

// Pre-tokenizer regex of a Hugging Face pre_tokenizer section: ByteLevel(use_regex) alone, or
// Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] as in Qwen / Llama 3.
std::string hf_pattern(const std::string& path, const json& pt) {
  auto bad = [&](const std::string& why) {
    return Error("tokenizer file " + path + ": unsupported pre_tokenizer (" + why +
                 "); lmtrain supports ByteLevel or Sequence[Split, ByteLevel]");
  };
  if (!pt.is_object()) throw bad("missing");
  const std::string type = pt.value("type", "");
  if (type == "ByteLevel") {
    if (!pt.value("use_regex", true)) throw bad("ByteLevel without a regex");
    return kGpt2Pattern;
  }
  if (type == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].size() == 2) {
    const json& split = pt["pretokenizers"][0];
    const json& bl = pt["pretokenizers"][1];
    if (split.value("type", "") != "Split" || bl.value("type", "") != "ByteLevel") {
      throw bad("Sequence is not [Split, ByteLevel]");
    }
    if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) {
      throw bad("Split behavior must be Isolated, not inverted");
    }
    if (!split.contains("pattern") || !split["pattern"].contains("Regex")) {
      throw bad("Split without a Regex pattern");
    }
    if (bl.value("use_regex", true)) throw bad("ByteLevel after Split must have use_regex=false");
    return split["pattern"]["Regex"].get<std::string>();
  }
  throw bad("type " + type);
}

// ByteLevel's add_prefix_space, alone or as the last step of a Sequence.
bool add_prefix_space(const json& pt) {
  const json& bl = pt.value("type", "") == "Sequence" ? pt["pretokenizers"].back() : pt;
  return bl.value("add_prefix_space", false);
}

}  // namespace

BpeTokenizer BpeTokenizer::load_gpt2(const std::string& encoder_json_path,
                                     const std::string& vocab_bpe_path) {
  FileVocab vocab;
  read_vocab_object(encoder_json_path, read_json(encoder_json_path), &vocab);

  std::ifstream in(vocab_bpe_path, std::ios::binary);
  if (!in) throw Error("cannot open merges file " + vocab_bpe_path);
  std::vector<Merge> merges;
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
      throw Error("merges file " + vocab_bpe_path + ":" + std::to_string(lineno) +
                  ": expected two tokens separated by one space, got '" + line + "'");
    }
    const std::string where = "merge on line " + std::to_string(lineno);
    merges.emplace_back(vocab.id_of(encoder_json_path, where, line.substr(0, sp)),
                        vocab.id_of(encoder_json_path, where, line.substr(sp + 1)));
  }
  std::vector<std::string> tokens = vocab.tokens(encoder_json_path);
  auto it = vocab.ids.find(kEndOfText);
  SpecialToken eot{kEndOfText, 0};
  if (it != vocab.ids.end()) {
    eot.id = it->second;
  } else {
    eot.id = static_cast<uint32_t>(tokens.size());
    tokens.push_back(kEndOfText);
  }
  return build(encoder_json_path, std::move(tokens), std::move(merges), {eot}, BpeOptions{});
}

BpeTokenizer BpeTokenizer::load_hf(const std::string& path) {
  const json j = read_json(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw Error("tokenizer file " + path + " has no \"model\" section");
  }
  const json& model = j["model"];
  if (model.contains("type") && model["type"] != "BPE") {
    throw Error("tokenizer file " + path + ": model type " + model["type"].dump() +
                " is not supported (only BPE)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      throw Error("tokenizer file " + path + ": model." + key + " is not supported");
    }
  }
  if (!model.contains("vocab")) throw Error("tokenizer file " + path + " has no model.vocab");
  BpeOptions options;
  options.pattern = hf_pattern(path, j.value("pre_tokenizer", json()));
  options.add_prefix_space = add_prefix_space(j.value("pre_tokenizer", json()));
  options.split_pretokenizer = j["pre_tokenizer"].value("type", "") == "Sequence";
  options.ignore_merges = model.value("ignore_merges", false);
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    options.normalizer = TextNormalizer::from_json(j["normalizer"].dump(), path);
  }

  FileVocab vocab;
  read_vocab_object(path, model["vocab"], &vocab);
  std::vector<SpecialToken> specials;
  if (j.contains("added_tokens")) {
    for (const json& t : j["added_tokens"]) {
      if (!t.contains("id") || !t.contains("content") || !t["id"].is_number_integer() ||
          !t["content"].is_string()) {
        throw Error("tokenizer file " + path +
                    ": added_tokens entry needs id and content: " + t.dump());
      }
      const std::string content = t["content"].get<std::string>();
      const int64_t id = t["id"].get<int64_t>();
      if (static_cast<size_t>(id) >= vocab.strings.size() || !vocab.present[id]) {
        vocab.add(path, content, id);
      }
      specials.push_back({content, static_cast<uint32_t>(id)});
    }
  }

  std::vector<Merge> merges;
  const json& jm = model.value("merges", json::array());
  if (!jm.is_array()) throw Error("tokenizer file " + path + ": model.merges is not a list");
  merges.reserve(jm.size());
  for (size_t r = 0; r < jm.size(); ++r) {
    const json& e = jm[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw Error("tokenizer file " + path + ": merge #" + std::to_string(r) + " '" + s +
                    "' is not two tokens separated by one space");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      throw Error("tokenizer file " + path + ": merge #" + std::to_string(r) +
                  " must be \"a b\" or [\"a\", \"b\"], got " + e.dump());
    }
    const std::string where = "merge #" + std::to_string(r);
    merges.emplace_back(vocab.id_of(path, where, a), vocab.id_of(path, where, b));
  }
  return build(path, vocab.tokens(path), std::move(merges), std::move(specials),
               std::move(options));
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    if (fs::exists(path + "/tokenizer.json")) return load_hf(path + "/tokenizer.json");
    if (fs::exists(path + "/encoder.json") && fs::exists(path + "/vocab.bpe")) {
      return load_gpt2(path + "/encoder.json", path + "/vocab.bpe");
    }
    throw Error("directory " + path + " holds neither tokenizer.json nor encoder.json + vocab.bpe");
  }
  return load_hf(path);
}

void BpeTokenizer::save_hf(const std::string& path) const {
  using ojson = nlohmann::ordered_json;
  // File string of every id: byte-level alphabet for ordinary tokens, raw text for specials.
  std::vector<std::string> strings(vocab_size());
  for (size_t id = 0; id < strings.size(); ++id) {
    const auto tid = static_cast<uint32_t>(id);
    strings[id] = is_special(tid) ? token_bytes(tid) : bytes_to_unicode(token_bytes(tid));
  }
  ojson added = ojson::array();
  for (const SpecialToken& s : special_tokens()) {
    added.push_back({{"id", s.id},
                     {"content", s.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  auto byte_level = [this](bool use_regex) {
    return ojson{{"type", "ByteLevel"},
                 {"add_prefix_space", options().add_prefix_space},
                 {"trim_offsets", true},
                 {"use_regex", use_regex}};
  };
  ojson pre;
  if (options().pattern == kGpt2Pattern && !options().split_pretokenizer) {
    pre = byte_level(true);
  } else {
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"},
              {"pattern", {{"Regex", options().pattern}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             byte_level(false)}}};
  }
  ojson vocab = ojson::object();
  for (size_t id = 0; id < strings.size(); ++id) vocab[strings[id]] = id;
  ojson merges = ojson::array();
  for (const Merge& mg : this->merges())
    merges.push_back(strings[mg.first] + " " + strings[mg.second]);

  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] =
      options().normalizer ? ojson::parse(options().normalizer->spec()) : ojson(nullptr);
  j["pre_tokenizer"] = std::move(pre);
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level(true);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", options().ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};

  // Write-then-rename so a reader never sees a half-written tokenizer.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write tokenizer file " + tmp);
    out << j.dump(1) << '\n';
    if (!out.flush()) throw Error("error writing tokenizer file " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace lmtrain::data
