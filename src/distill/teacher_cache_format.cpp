#include "distill/teacher_cache_format.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::train {
namespace {

constexpr char kMagic[8] = {'L', 'M', 'T', 'K', 'D', 'C', '0', '1'};
constexpr size_t kAlign = 64;

size_t padded(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::string teacher_cache_prefix(const TeacherCacheInfo& info) {
  const nlohmann::json j = {{"windows", info.windows},
                            {"seq_len", info.seq_len},
                            {"top_k", info.top_k},
                            {"vocab_size", info.vocab_size},
                            {"temperature", info.temperature},
                            {"train_tokens", info.train_tokens},
                            {"tokenizer_hash", info.tokenizer_hash},
                            {"teacher", info.teacher},
                            {"teacher_sha256", info.teacher_sha256}};
  const std::string header = j.dump();
  const uint64_t header_bytes = header.size();
  std::string prefix(kMagic, sizeof(kMagic));
  prefix.append(reinterpret_cast<const char*>(&header_bytes), sizeof(header_bytes));
  prefix += header;
  prefix.resize(padded(prefix.size()), '\0');
  return prefix;
}

TeacherCacheLayout parse_teacher_cache(const unsigned char* bytes, size_t size,
                                       const std::string& path) {
  auto bad = [&](const std::string& why) {
    return Error("teacher cache " + path + " is damaged or not a teacher cache: " + why +
                 " (rewrite it with `lmtrain distill-cache`)");
  };
  constexpr size_t kFixed = sizeof(kMagic) + sizeof(uint64_t);
  if (size < kFixed) throw bad("too short");
  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0) throw bad("wrong magic");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes + sizeof(kMagic), sizeof(header_bytes));
  if (header_bytes > size - kFixed) throw bad("header length past the end");
  TeacherCacheLayout layout;
  TeacherCacheInfo& info = layout.info;
  const auto j = nlohmann::json::parse(bytes + kFixed, bytes + kFixed + header_bytes, nullptr,
                                       /*allow_exceptions=*/false);
  if (!j.is_object()) throw bad("the header is not a JSON object");
  auto integer = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      throw bad(std::string("header field '") + key + "' missing or not an integer");
    }
    return j[key].get<int64_t>();
  };
  auto text = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) {
      throw bad(std::string("header field '") + key + "' missing or not a string");
    }
    return j[key].get<std::string>();
  };
  info.windows = integer("windows");
  info.seq_len = integer("seq_len");
  info.top_k = integer("top_k");
  info.vocab_size = integer("vocab_size");
  info.train_tokens = integer("train_tokens");
  if (!j.contains("temperature") || !j["temperature"].is_number()) {
    throw bad("header field 'temperature' missing or not a number");
  }
  info.temperature = j["temperature"].get<double>();
  info.tokenizer_hash = text("tokenizer_hash");
  info.teacher = text("teacher");
  info.teacher_sha256 = text("teacher_sha256");
  if (info.windows < 1 || info.windows > (int64_t{1} << 40) || info.seq_len < 1 ||
      info.seq_len > (1 << 24) || info.vocab_size < 2 || info.vocab_size > (1 << 30) ||
      info.top_k < 1 || info.top_k >= info.vocab_size || info.train_tokens < 0 ||
      !(info.temperature > 0 && info.temperature < 1e6)) {
    throw bad("header values out of range");
  }
  const size_t data_offset = padded(kFixed + header_bytes);
  const auto rows = static_cast<unsigned __int128>(info.windows) * info.seq_len;
  const auto index_bytes = rows * info.top_k * 4;
  const auto expected = index_bytes + rows * (info.top_k + 1) * 4 + data_offset;
  if (expected != size) {
    throw bad(log::format("%zu bytes where the header implies %.0f", size,
                          static_cast<double>(expected)));
  }
  layout.index_offset = data_offset;
  layout.logit_offset = data_offset + static_cast<size_t>(index_bytes);
  return layout;
}

}  // namespace lmtrain::train
