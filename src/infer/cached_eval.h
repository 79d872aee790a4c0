// Teacher-forced evaluation through a KV cache policy: every token of a window is fed alone and
// predicted from the cache of what came before it, so a compressing cache's quality loss shows
// in the loss (a full cache gives the plain forward's loss).
#pragma once
#include <cstdint>

#include "data/window_stream.h"
#include "infer/kv_cache_policy.h"
#include "model/gpt.h"

namespace lmtrain::core {
class Progress;
}

namespace lmtrain::infer {

struct CachedEval {
  double loss = 0;                   // mean cross-entropy over every predicted token
  double cache_bytes_per_token = 0;  // cache bytes held at the end of a window / tokens held
  int64_t tokens = 0;                // predictions made
};

// Windows [0, batches * batch) of `stream` (in stream order), `batch` at a time. `progress`
// (when given) is told each batch.
CachedEval evaluate_with_cache(model::GptImpl& model, const data::WindowStream& stream,
                               int64_t batch, int64_t batches, const KvPolicy& policy,
                               core::Progress* progress = nullptr);

}  // namespace lmtrain::infer
