// Reading a checkpoint whose parameters were saved as shards (checkpoint/sharded_save.h):
// meta.json's "model_shards" says which flat range of which tensor each rank's file holds, and
// every reader takes only the byte ranges it needs from those files (core/safetensors_slice.h).
//
//   "model_shards": {
//     "format": 1,                             // 2 with expert parallelism ("ep")
//     "zero": 3, "world_size": N, "shard_group_size": G, "tp": 1,   // the layout that saved it
//     "ep": E,                                 // dist.ep, format 2 only (absent: 1)
//     "flat_numel": F,                         // elements of the flat layout (optim/flat_params.h)
//     "files": [{"file": "model.rank0.safetensors", "rank": 0, "tensors": ["params"],
//                "flat": [0, S]},              // tensor "params" of that file = flat[0, S)
//               {"file": "optim.rank0.safetensors", "rank": 0,
//                "tensors": ["exp_avg", "exp_avg_sq"], "flat": [0, S]}, ...],
//     "tensors": [{"name": "transformer.h.0.attn.c_attn.weight", "in": "model.safetensors",
//                  "segment": "transformer.h.0.attn.c_attn.weight",  // its flat segment
//                  "shape": [out, in], "dtype": "F32", "flat": [offset, offset + numel]},
//                 {"name": "...", "in": "model.safetensors", "shape": [...],
//                  "file": "model.rank0.safetensors"},   // a buffer, stored whole by name
//                 ...]}
//
// A tensor is found in the flat space ("flat": its elements, row-major, in the files whose
// ranges cover them), whole in one file ("file"), or, split by tensor parallelism (dist.tp), as
// "slices": [{"tp_rank": t, "flat": [b, e], "dim": d, "ranges": [[a0, b0], ...]}]: TP rank t's
// local tensor (the full shape with dimension d cut to rows a0..b0, then a1..b1, ...) lies at
// flat [b, e) of TP rank t's flat layout. Under TP ("tp": T > 1) each file entry says whose
// flat layout its range indexes ("tp_rank"; absent: 0), and a "flat" tensor entry, whole on
// every TP rank, is read from TP rank 0's.
// Expert parallelism (format 2, "ep": E > 1; format 1 has no "ep" and stays readable): every EP
// rank has its own flat layout of the same segments and offsets, whose expert region [B, F)
// holds its own experts. A file entry with "ep_rank": e holds part of EP rank e's layout
// (model.ep<e> / optim.ep<e>: its expert region); one without "ep_rank" holds what every EP
// rank shares. An expert stack (n experts on dim 0) is "slices" along dim 0, one per EP rank:
//   {"name": "transformer.h.1.mlp.experts.c_fc.weight", "shape": [n, ...],
//    "slices": [{"ep_rank": 0, "flat": [b, e], "dim": 0, "ranges": [[0, n/E]]},
//               {"ep_rank": 1, "flat": [b, e], "dim": 0, "ranges": [[n/E, 2n/E]]}, ...]}
// A file entry with "by_name": true (no "tensors", no "flat") holds optimizer state by name in
// its TP rank's local shapes (Muon under dist.tp: "momentum.<matrix>", "exp_avg.<p>", ...):
// "<state>.<segment>" is made whole from its TP ranks' files by its segment's entry, as above.
// "in" names the logical file the tensor belongs to ("model.safetensors",
// "objective.safetensors"): assemble_sharded_file() rebuilds one of those whole, so every
// command that reads a model (eval, export hf, generate, init_from) reads a sharded checkpoint.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

bool has_model_shards(const nlohmann::json& meta);

// meta.json's "model_shards", checked for a format this reader knows and for its structure
// (checkpoint/shard_layout_check.h).
const nlohmann::json& model_shards_of(const nlohmann::json& meta);

// A rank's local tensor of a parameter, of shape `local_shape`: `where` is the tensor entry or
// its slice, whose "flat" ([b, e]) is the range in the flat layout of TP rank "tp_rank" / EP rank
// "ep_rank" (absent: 0).
using LocalPiece =
    std::function<at::Tensor(const nlohmann::json& where, const std::vector<int64_t>& local_shape)>;
// The whole tensor of "tensors" entry `t` from its pieces: its flat range (TP rank 0's, whole on
// every TP rank), or its TP slices put back in place.
at::Tensor assemble_shard_entry(const nlohmann::json& t, const LocalPiece& piece);
// The whole tensor of entry `t` from the flat tensor `flat_name` ("params", "exp_avg",
// "exp_avg_sq") of the shard files.
at::Tensor read_shard_entry(const std::string& dir, const nlohmann::json& meta,
                            const nlohmann::json& t, const std::string& flat_name);

// The files listed in meta.json's "model_shards" (read by range, never loaded whole).
std::set<std::string> model_shard_files(const nlohmann::json& meta);

// The logical files the shards make up ("model.safetensors", "objective.safetensors").
std::set<std::string> sharded_logical_files(const nlohmann::json& meta);

// " (the shard of rank R of the N-rank ZeRO-3 layout)" for a shard file, else "".
std::string shard_file_note(const nlohmann::json& meta, const std::string& file);

// The part of a parameter a tensor-parallel rank holds: dimension `dim` (-1: all of it) of its
// whole shape cut to `ranges`, concatenated in order (parallel/tensor_parallel_plan.h's TpSlice).
struct LocalRows {
  int64_t dim = -1;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<int64_t> whole_shape;
};

// A tensor-parallel run's own part of a checkpoint's tensors, by parameter name; empty: the run
// is not tensor-parallel. `cut` takes it from a whole tensor (the whole tensor for one it does
// not split, or of a shape other than the model's: the load then names it); `rows` says which
// part, so that a resume reads only those elements. This rank is TP rank `tp_rank` of `tp`.
struct TensorLocalizer {
  std::function<at::Tensor(const std::string& name, const at::Tensor& whole)> cut;
  std::function<LocalRows(const std::string& name)> rows;
  int64_t tp_rank = 0;
  int64_t tp = 1;
  // An expert-parallel run (dist.ep > 1): its EP rank, and the EP degree whose saved slices are
  // its own experts (rows picks them out of a stack of another layout).
  int64_t ep_rank = 0;
  int64_t ep = 1;
  explicit operator bool() const { return static_cast<bool>(cut); }
  at::Tensor operator()(const std::string& name, const at::Tensor& whole) const {
    return cut(name, whole);
  }
};

// Elements [begin, begin + count) of a whole tensor, flattened row-major.
using FlatReader = std::function<at::Tensor(int64_t begin, int64_t count)>;
// This rank's part (`rows`) of a tensor of whole shape `shape` through `read`: a dim-0 cut reads
// only its rows' elements; a cut along a later dim (a row-parallel weight's input columns: a
// strided set) reads blocks of whole dim-0 rows, of about `block_elements` elements (at least
// one row) each, keeping each block's part before the next is read: the tensor is never whole
// in memory, this rank's part and one block are. A tensor of another shape than
// rows.whole_shape is read whole (the load then names it).
inline constexpr int64_t kLocalRowsBlockElements = int64_t{1} << 20;  // 4 MiB of fp32
at::Tensor read_local_rows(const std::vector<int64_t>& shape, const LocalRows& rows,
                           const FlatReader& read,
                           int64_t block_elements = kLocalRowsBlockElements);

// Elements [begin, end) of the flat tensor `tensor` ("params", "exp_avg", "exp_avg_sq") of TP
// rank `tp_rank`'s (EP rank `ep_rank`'s) flat layout as a (end - begin,) fp32 CPU tensor;
// elements no file covers (the layout's tail padding) are 0. A missing shard file is an Error
// naming it and its rank.
at::Tensor read_flat_range(const std::string& dir, const nlohmann::json& meta,
                           const std::string& tensor, int64_t begin, int64_t end,
                           int64_t tp_rank = 0, int64_t ep_rank = 0);

// This rank's part of parameter `name`'s entry `t` from the flat tensor `flat_name`, reading only
// its elements: the slice saved for this TP rank when the checkpoint has this run's TP degree,
// else its rows of the saved tensor (read_local_rows).
at::Tensor read_local_shard_entry(const std::string& dir, const nlohmann::json& meta,
                                  const nlohmann::json& t, const std::string& flat_name,
                                  const std::string& name, const TensorLocalizer& local);
// The saved slice of entry `t` that holds exactly this rank's part of parameter `name` (same TP
// and EP degrees, TP / EP rank, dim and ranges), or null. An entry saved whole matches a part that
// is whole.
const nlohmann::json* own_saved_slice(const nlohmann::json& meta, const nlohmann::json& t,
                                      const std::string& name, const TensorLocalizer& local);

// One logical file's tensors (by name, in the order they were saved) assembled from the shards.
// With `local` (a tensor-parallel run) each tensor is this rank's part, read alone where the
// layout allows (read_local_shard_entry).
core::SafetensorsFile assemble_sharded_file(const std::string& dir, const nlohmann::json& meta,
                                            const std::string& logical_file,
                                            const TensorLocalizer& local = {});

// A model file's tensors one at a time: tensor `name`, read when asked (nullopt: the file has
// none), so that a resume copies each into the model without the whole file beside it.
using TensorByName = std::function<std::optional<at::Tensor>(const std::string& name)>;
// Logical file `logical_file`'s tensors from the shards, each read alone (its byte ranges only;
// with `local`, this rank's part of it, as assemble_sharded_file). `meta` must outlive the
// reader.
TensorByName sharded_tensor_reader(const std::string& dir, const nlohmann::json& meta,
                                   const std::string& logical_file,
                                   const TensorLocalizer& local = {});

// sha256 that identifies a checkpoint's model weights: its model.safetensors' as meta.json lists
// it, or for a sharded checkpoint the sha256 of its shard files' listed sha256s, in order.
std::string model_weights_sha256(const nlohmann::json& meta);

// Restores the optimizer's Adam moments from the shards, whatever layout the optimizer has now:
// a ZeRO optimizer (any stage, any group size) reads only its own flat range of the moments; a
// replicated one reads them whole, by parameter. Moments saved as TP slices, or read by a
// tensor-parallel run (`localize` set), go by parameter: whole, then cut to this run's slices;
// Muon's state (files "by_name") too, for a Muon optimizer in any layout.
// Throws lmtrain::Error for a different parameter layout (another model) or an optimizer whose
// state does not come from Adam moments.
void restore_sharded_optimizer(const std::string& dir, const nlohmann::json& meta,
                               optim::Optimizer& optimizer, const TensorLocalizer& localize = {});

}  // namespace lmtrain::train
