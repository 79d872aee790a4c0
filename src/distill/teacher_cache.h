// The offline teacher of a distillation run: the teacher's k largest logits (and their token
// ids) at every position of every training window, written once by `lmtrain distill-cache` and
// read by training (distill.cache) instead of running the teacher.
//
// File layout (little-endian):
//   "LMTKDC01"                   8 bytes
//   uint64 header_bytes          then a JSON header of that many bytes: windows, seq_len, top_k,
//                                vocab_size, temperature, tokenizer_hash, teacher (its
//                                checkpoint dir), teacher_sha256 (of its model.safetensors),
//                                train_tokens
//   zero padding to a multiple of 64 bytes
//   int32  index[windows][seq_len][top_k]      token ids, largest logit first
//   float  logit[windows][seq_len][top_k + 1]  the teacher's (soft-capped) logits of those ids,
//                                              then the log-sum-exp of all its logits divided by
//                                              the temperature (the rest of the distribution)
// Rows are indexed by window id (data/window_stream.h), so any order, world size or resume
// reads the rows of the windows it trains on.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "distill/teacher_cache_format.h"
#include "model/gpt.h"

namespace lmtrain::data {
class WindowStream;
}

namespace lmtrain::train {

// Runs `teacher` (eval mode) over every window of `stream` (windows of `batch_windows` at a
// time) and writes the cache to `path` atomically (a temporary file renamed at the end).
// info.windows/seq_len/top_k/vocab_size are filled here. Returns false, with nothing written and
// its temporaries removed, when a stop was requested (core/stop_signal.h) before the end.
bool write_teacher_cache(const std::string& path, model::GptImpl& teacher,
                         const data::WindowStream& stream, TeacherCacheInfo info,
                         int64_t batch_windows, const core::Runtime& rt);

// A read-only memory-mapped cache. Validates the header and the file size on open.
class TeacherCache {
 public:
  explicit TeacherCache(const std::string& path);
  ~TeacherCache();
  TeacherCache(const TeacherCache&) = delete;
  TeacherCache& operator=(const TeacherCache&) = delete;

  const TeacherCacheInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  // The rows of `window_ids`: logits (n, T, k + 1) float (the k logits, then the log-sum-exp)
  // and indices (n, T, k) int64, on `device`.
  // Throws naming the file if an index lies outside the vocabulary (a damaged cache).
  std::pair<at::Tensor, at::Tensor> rows(const std::vector<int64_t>& window_ids,
                                         const c10::Device& device) const;

 private:
  std::string path_;
  TeacherCacheInfo info_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const int32_t* index_ = nullptr;
  const float* logit_ = nullptr;
};

}  // namespace lmtrain::train
