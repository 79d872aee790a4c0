#include "infer/cached_eval.h"

#include <ATen/ATen.h>

#include <numeric>

#include "core/progress.h"
#include "data/batch.h"

namespace lmtrain::infer {

CachedEval evaluate_with_cache(model::GptImpl& model, const data::WindowStream& stream,
                               int64_t batch, int64_t batches, const KvPolicy& policy,
                               core::Progress* progress) {
  at::NoGradGuard no_grad;
  model.eval();
  CachedEval r;
  double bytes_per_token = 0;
  // On the model's device, read once at the end: no wait for the GPU per token.
  auto loss_sum = at::zeros({}, at::TensorOptions(model.device()).dtype(at::kDouble));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> ids(static_cast<size_t>(batch));
    std::iota(ids.begin(), ids.end(), (b * batch) % std::max<int64_t>(1, stream.num_windows()));
    for (auto& id : ids) id %= stream.num_windows();
    auto [x, y] = data::make_batch(stream, ids, model.device());  // (B, T) each
    const int64_t T = x.size(1);
    auto cache = make_kv_cache(policy, model, batch, T);
    for (int64_t t = 0; t < T; ++t) {
      auto logits = model.forward_cached(x.narrow(1, t, 1), *cache);  // (B, 1, V)
      loss_sum +=
          at::cross_entropy_loss(logits.squeeze(1).to(at::kFloat), y.select(1, t)).to(at::kDouble) *
          static_cast<double>(batch);
    }
    r.tokens += batch * T;
    bytes_per_token += static_cast<double>(cache->bytes()) /
                       static_cast<double>(cache->held() * batch) / static_cast<double>(batches);
    if (progress) progress->add(1);
  }
  r.loss = loss_sum.item<double>() / static_cast<double>(r.tokens);
  r.cache_bytes_per_token = bytes_per_token;
  return r;
}

}  // namespace lmtrain::infer
