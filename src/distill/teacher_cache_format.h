// The byte layout of an offline teacher cache (distill/teacher_cache.h), without libtorch: what
// the writer puts before the data, and the checks a reader makes before trusting a file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmtrain::train {

struct TeacherCacheInfo {
  int64_t windows = 0;
  int64_t seq_len = 0;
  int64_t top_k = 0;
  int64_t vocab_size = 0;
  int64_t train_tokens = 0;  // tokens in the train shard the windows come from
  double temperature = 1;    // of the stored log-sum-exp (distill.temperature)
  std::string tokenizer_hash;
  std::string teacher;  // checkpoint dir
  std::string teacher_sha256;
};

// "LMTKDC01", the header length, the JSON header, zero padding to a multiple of 64 bytes.
std::string teacher_cache_prefix(const TeacherCacheInfo& info);

struct TeacherCacheLayout {
  TeacherCacheInfo info;
  size_t index_offset = 0;  // int32 [windows][seq_len][top_k]
  size_t logit_offset = 0;  // float [windows][seq_len][top_k + 1]
};

// Checks the magic, the header (every field present, of its type, in range) and that the size
// is exactly what the header implies. Throws lmtrain::Error naming `path` and the problem.
TeacherCacheLayout parse_teacher_cache(const unsigned char* bytes, size_t size,
                                       const std::string& path);

}  // namespace lmtrain::train
