#include "train/chat_packing.h"

#include <torch/torch.h>

#include <algorithm>
#include <deque>

#include "core/error.h"
#include "model/gpt.h"

namespace lmtrain::train {
namespace {

// Rows still open to later conversations: enough for a good fill (a new row is opened only
// when none of them has room), few enough that packing stays linear in the conversations.
constexpr size_t kOpenPackRows = 64;

}  // namespace

std::vector<std::vector<int64_t>> pack_conversations(const std::vector<int64_t>& widths,
                                                     const std::vector<int64_t>& order,
                                                     int64_t capacity) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> fill;
  std::deque<size_t> open;  // indices into rows, oldest first
  for (int64_t i : order) {
    const int64_t w = std::min(widths.at(static_cast<size_t>(i)), capacity);
    if (w <= 0) continue;
    size_t into = rows.size();
    for (size_t r : open) {
      if (fill[r] + w <= capacity) {
        into = r;
        break;
      }
    }
    if (into == rows.size()) {
      rows.emplace_back();
      fill.push_back(0);
      open.push_back(into);
      if (open.size() > kOpenPackRows) open.pop_front();
    }
    rows[into].push_back(i);
    fill[into] += w;
  }
  return rows;
}

Batch packed_chat_batch(const std::vector<std::vector<PackedPart>>& rows, int64_t seq_len,
                        int64_t bucket, const c10::Device& device) {
  const auto B = static_cast<int64_t>(rows.size());
  int64_t fullest = 1;
  for (const auto& row : rows) {
    int64_t slots = 0;
    for (const auto& part : row) slots += std::max<int64_t>(0, (int64_t)part.ids.size() - 1);
    fullest = std::max(fullest, slots);
  }
  if (fullest > seq_len) throw Error("internal: a packed row holds more than data.seq_len tokens");
  const int64_t W = std::min(seq_len, (fullest + bucket - 1) / bucket * bucket);
  auto x = torch::zeros({B, W}, torch::kLong);  // padding id 0: its targets are ignored
  auto y = torch::full({B, W}, model::kIgnoreIndex, torch::kLong);
  auto d = torch::zeros({B, W}, torch::kLong);
  auto xa = x.accessor<int64_t, 2>();
  auto ya = y.accessor<int64_t, 2>();
  auto da = d.accessor<int64_t, 2>();
  int64_t valid = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t at = 0, doc = 0;
    for (const auto& part : rows[static_cast<size_t>(b)]) {
      const int64_t n = static_cast<int64_t>(part.ids.size()) - 1;
      if (n <= 0) continue;
      for (int64_t j = 0; j < n; ++j, ++at) {
        xa[b][at] = part.ids[static_cast<size_t>(j)];
        da[b][at] = doc;
        if (part.target[static_cast<size_t>(j) + 1]) {
          ya[b][at] = part.ids[static_cast<size_t>(j) + 1];
          ++valid;
        }
      }
      ++doc;
    }
    for (; at < W; ++at) da[b][at] = doc;  // the padding: a document of its own
  }
  Batch batch;
  batch.valid_tokens = valid;
  batch.masked = valid < B * W;
  batch.tensors.emplace("inputs", x.to(device));
  batch.tensors.emplace("targets", y.to(device));
  batch.tensors.emplace("documents", d.to(device));
  return batch;
}

}  // namespace lmtrain::train
