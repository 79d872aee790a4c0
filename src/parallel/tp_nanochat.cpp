#include "parallel/tp_nanochat.h"

#include <ATen/ATen.h>

#include "parallel/tp_layers.h"
#include "parallel/tp_regions.h"

namespace lmtrain::parallel {

std::optional<TpSlice> tp_nanochat_slice(const model::GptConfig& cfg, const std::string& name,
                                         const std::vector<int64_t>& whole_shape, int rank,
                                         int tp) {
  const bool table = name.rfind("nanochat.value_embeds.", 0) == 0;
  const std::string gate_tail = ".attn.ve_gate.weight";
  const bool gate = name.size() > gate_tail.size() &&
                    name.compare(name.size() - gate_tail.size(), gate_tail.size(), gate_tail) == 0;
  if (!table && !gate) return std::nullopt;
  TpSlice s;
  s.whole_shape = whole_shape;
  s.dim = table ? 1 : 0;  // the table's K D columns, the gate's K rows: heads in order
  const int64_t heads = cfg.kv_heads() / tp, width = table ? cfg.head_dim() : 1;
  s.ranges = {{rank * heads * width, (rank + 1) * heads * width}};
  return s;
}

void install_tp_nanochat(model::GptImpl& model, dist::Group& tp) {
  dist::Group* g = &tp;
  for (auto& block : model.transformer->blocks) {
    auto& gate = block->attn->ve_gate;
    if (!gate) continue;
    // x (B, T_seq / tp, 12) -> (B, T_seq, K / tp): this rank's heads' gates, every position.
    gate->set_product([g](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
      return train::column_parallel_linear(x, w, b, *g, /*sequence_parallel=*/true);
    });
  }
  if (!model.config().smear) return;
  const int rank = tp.rank(), T = tp.size();
  model::GptImpl::SequencePiece piece;
  piece.shift_right = [g](const at::Tensor& x) { return train::shift_sequence_right(x, 1, *g); };
  piece.local = [rank, T](const at::Tensor& whole) {  // (B, T_seq) -> (B, T_seq / tp)
    const int64_t n = whole.size(1) / T;
    return whole.narrow(1, rank * n, n);
  };
  model.set_sequence_piece(std::move(piece));
}

}  // namespace lmtrain::parallel
