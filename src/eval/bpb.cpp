#include "eval/bpb.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"

namespace lmtrain::eval {

BpbResult bits_per_byte(model::GptImpl& model, const data::BpeTokenizer& tok,
                        const std::vector<int64_t>& tokens, int64_t seq_len, int64_t batch,
                        int64_t max_windows, const ItemShard& shard) {
  torch::NoGradGuard no_grad;
  const auto device = model.parameters().front().device();
  // bytes_of[id]: UTF-8 bytes token id spells; 0 for special tokens.
  std::vector<int64_t> bytes_of(tok.vocab_size());
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) {
    bytes_of[id] = tok.is_special(id) ? 0 : static_cast<int64_t>(tok.token_bytes(id).size());
  }
  const auto token_bytes = torch::tensor(bytes_of, torch::kLong);  // (V,)
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<std::pair<int64_t, int64_t>> windows;  // [start, start + len + 1)
  for (int64_t s = 0; s + 1 < n; s += seq_len) {
    windows.emplace_back(s, std::min(seq_len, n - 1 - s));
    if (max_windows > 0 && static_cast<int64_t>(windows.size()) == max_windows) break;
  }
  if (windows.empty()) throw UsageError("bits per byte: fewer than two tokens to score");
  double nats = 0;
  int64_t counted = 0, bytes = 0;
  for (size_t w = 0; w < windows.size(); w += static_cast<size_t>(batch)) {
    if (!shard.owns(static_cast<int64_t>(w) / batch)) continue;
    const size_t end = std::min(windows.size(), w + static_cast<size_t>(batch));
    const auto B = static_cast<int64_t>(end - w);
    int64_t T = 0;
    for (size_t k = w; k < end; ++k) T = std::max(T, windows[k].second);
    auto x = torch::zeros({B, T}, torch::kLong);                      // (B, T)
    auto y = torch::full({B, T}, model::kIgnoreIndex, torch::kLong);  // (B, T)
    for (size_t k = w; k < end; ++k) {
      const auto [s, len] = windows[k];
      const auto b = static_cast<int64_t>(k - w);
      x[b].narrow(0, 0, len).copy_(torch::tensor(
          std::vector<int64_t>(tokens.begin() + s, tokens.begin() + s + len), torch::kLong));
      y[b].narrow(0, 0, len).copy_(
          torch::tensor(std::vector<int64_t>(tokens.begin() + s + 1, tokens.begin() + s + 1 + len),
                        torch::kLong));
    }
    const auto logits = model.forward(x.to(device)).to(torch::kFloat).cpu();  // (B, T, V)
    const auto flat_y = y.reshape({-1});
    const auto valid = flat_y.ne(model::kIgnoreIndex);
    const auto safe_y = flat_y.clamp_min(0);
    const auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({B * T, -1}), safe_y,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // (B*T,)
    const auto nb = token_bytes.index_select(0, safe_y) * valid;                    // (B*T,)
    const auto counts = nb.gt(0);
    nats += (loss.to(torch::kDouble) * counts).sum().item<double>();
    counted += counts.sum().item<int64_t>();
    bytes += nb.sum().item<int64_t>();
  }
  BpbResult r;
  r.nats = nats;
  r.tokens = counted;
  r.bytes = bytes;
  r.windows = static_cast<int64_t>(windows.size());
  if (shard.world == 1) finish_bpb(r);
  return r;
}

void finish_bpb(BpbResult& r) {
  if (r.bytes == 0) throw UsageError("bits per byte: the scored tokens spell no bytes");
  r.bpb = r.nats / (std::log(2.0) * static_cast<double>(r.bytes));
}

std::vector<int64_t> split_tokens(const data::TokenSplit& split, int64_t max_tokens) {
  auto n = static_cast<int64_t>(split.size());
  if (max_tokens > 0) n = std::min(n, max_tokens);
  std::vector<int64_t> out(static_cast<size_t>(n));
  split.copy_window(0, static_cast<size_t>(n), out.data());
  return out;
}

}  // namespace lmtrain::eval
