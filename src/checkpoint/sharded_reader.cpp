#include "checkpoint/sharded_reader.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint/shard_layout_check.h"
#include "core/error.h"
#include "core/safetensors_slice.h"
#include "core/sha256.h"

namespace lmtrain::train {
namespace {

// Format 2 adds expert parallelism's fields ("ep", "ep_rank"); format 1 has none of them.
constexpr int kShardFormat = 2;

const nlohmann::json& shards_of(const nlohmann::json& meta) {
  const auto& s = meta.at("model_shards");
  const auto& format = s.is_object() && s.contains("format") ? s["format"] : nlohmann::json();
  const int64_t f = format.is_number_integer() ? format.get<int64_t>() : 0;
  if (f < 1 || f > kShardFormat) {
    throw Error("checkpoint: model_shards format " + std::to_string(f) +
                " is not one this lmtrain reads (" + std::to_string(kShardFormat) +
                "): it was written by a newer version");
  }
  check_model_shards(s);
  return s;
}

std::string layout_text(const nlohmann::json& s) {
  const std::string ranks = "the " + std::to_string(s.value("world_size", 0)) + "-rank ";
  const int64_t tp = s.value("tp", 1), zero = s.value("zero", 0), ep = s.value("ep", 1);
  if (ep > 1) {
    return ranks + "dist.ep=" + std::to_string(ep) +
           (zero > 0 ? " x ZeRO-" + std::to_string(zero) : "") + " layout";
  }
  if (tp <= 1) return ranks + "ZeRO-" + std::to_string(zero) + " layout";
  return ranks + "dist.tp=" + std::to_string(tp) +
         (zero > 0 ? " x ZeRO-" + std::to_string(zero) : "") + " layout";
}

// Whether entry `t` is saved as slices that all cut dim 0 (EP's, or TP's row splits).
bool dim0_slices(const nlohmann::json& t) {
  if (!t.contains("slices")) return false;
  for (const auto& sl : t["slices"]) {
    if (sl.at("dim").get<int64_t>() != 0) return false;
  }
  return true;
}

// Elements [begin, begin + n) of the whole tensor of entry `t` (saved as dim-0 slices), which
// read_local_rows asks for whole rows at a time: each row is read from the slice that holds it.
at::Tensor read_sliced_rows(const std::string& dir, const nlohmann::json& meta,
                            const nlohmann::json& t, const std::string& flat_name, int64_t begin,
                            int64_t n) {
  const auto shape = t.at("shape").get<std::vector<int64_t>>();
  int64_t inner = 1;
  for (size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  auto out = at::zeros({n}, at::kFloat);
  if (inner == 0 || n == 0) return out;
  const int64_t rb = begin / inner, re = (begin + n) / inner;  // whole rows [rb, re)
  for (const auto& sl : t.at("slices")) {
    const int64_t fb = sl.at("flat")[0].get<int64_t>();
    int64_t at_local = 0;  // rows of this slice before the range
    for (const auto& r : sl.at("ranges")) {
      const int64_t a0 = r[0].get<int64_t>(), a1 = r[1].get<int64_t>();
      const int64_t lo = std::max(rb, a0), hi = std::min(re, a1);
      if (lo < hi) {
        const int64_t from = fb + (at_local + lo - a0) * inner;
        out.narrow(0, (lo - rb) * inner, (hi - lo) * inner)
            .copy_(read_flat_range(dir, meta, flat_name, from, from + (hi - lo) * inner,
                                   sl.value("tp_rank", int64_t{0}),
                                   sl.value("ep_rank", int64_t{0})));
      }
      at_local += a1 - a0;
    }
  }
  return out;
}

}  // namespace

const nlohmann::json& model_shards_of(const nlohmann::json& meta) { return shards_of(meta); }

at::Tensor assemble_shard_entry(const nlohmann::json& t, const LocalPiece& piece) {
  const auto shape = t.at("shape").get<std::vector<int64_t>>();
  if (t.contains("flat")) return piece(t, shape);
  auto whole = at::zeros(shape, at::kFloat);
  for (const auto& sl : t.at("slices")) {
    const int64_t dim = sl.at("dim").get<int64_t>();
    auto local_shape = shape;
    local_shape[dim] = 0;
    for (const auto& r : sl.at("ranges"))
      local_shape[dim] += r[1].get<int64_t>() - r[0].get<int64_t>();
    const auto local = piece(sl, local_shape);
    int64_t at_local = 0;
    for (const auto& r : sl.at("ranges")) {
      const int64_t rb = r[0].get<int64_t>(), n = r[1].get<int64_t>() - rb;
      whole.narrow(dim, rb, n).copy_(local.narrow(dim, at_local, n));
      at_local += n;
    }
  }
  return whole;
}

at::Tensor read_shard_entry(const std::string& dir, const nlohmann::json& meta,
                            const nlohmann::json& t, const std::string& flat_name) {
  return assemble_shard_entry(
      t, [&](const nlohmann::json& where, const std::vector<int64_t>& local_shape) {
        const int64_t b = where["flat"][0].get<int64_t>(), e = where["flat"][1].get<int64_t>();
        return read_flat_range(dir, meta, flat_name, b, e, where.value("tp_rank", int64_t{0}),
                               where.value("ep_rank", int64_t{0}))
            .reshape(local_shape);
      });
}

at::Tensor read_local_rows(const std::vector<int64_t>& shape, const LocalRows& rows,
                           const FlatReader& read, int64_t block_elements) {
  int64_t numel = 1;
  for (int64_t n : shape) numel *= n;
  if (rows.dim < 0 || shape != rows.whole_shape) return read(0, numel).reshape(shape);
  if (rows.dim > 0) {
    if (numel == 0) return read(0, 0).reshape(shape);
    // Blocks of whole dim-0 rows (`inner` elements each), each cut along rows.dim into `out`.
    const int64_t inner = numel / shape[0];
    const int64_t per_block = std::max<int64_t>(1, block_elements / inner);
    auto local_shape = shape;
    local_shape[rows.dim] = 0;
    for (const auto& [b, e] : rows.ranges) local_shape[rows.dim] += e - b;
    at::Tensor out;
    for (int64_t r0 = 0; r0 < shape[0]; r0 += per_block) {
      const int64_t n = std::min(per_block, shape[0] - r0);
      auto block_shape = shape;
      block_shape[0] = n;
      const auto block = read(r0 * inner, n * inner).reshape(block_shape);
      if (!out.defined()) out = at::empty(local_shape, block.options());
      int64_t at_col = 0;  // this block's part, range by range, into its rows of `out`
      for (const auto& [b, e] : rows.ranges) {
        out.narrow(0, r0, n)
            .narrow(rows.dim, at_col, e - b)
            .copy_(block.narrow(rows.dim, b, e - b));
        at_col += e - b;
      }
    }
    return out;
  }
  // Dim 0: each range is one run of elements, rows [b, e) of `inner` elements each.
  const int64_t inner = shape.empty() || shape[0] == 0 ? 0 : numel / shape[0];
  std::vector<at::Tensor> parts;
  auto local_shape = shape;
  local_shape[0] = 0;
  for (const auto& [b, e] : rows.ranges) {
    parts.push_back(read(b * inner, (e - b) * inner));
    local_shape[0] += e - b;
  }
  return at::cat(parts).reshape(local_shape);
}

const nlohmann::json* own_saved_slice(const nlohmann::json& meta, const nlohmann::json& t,
                                      const std::string& name, const TensorLocalizer& local) {
  const LocalRows rows = local.rows(name);
  if (t.contains("flat")) return rows.dim < 0 ? &t : nullptr;
  const auto& s = shards_of(meta);
  if (!t.contains("slices") || s.value("tp", int64_t{1}) != local.tp ||
      s.value("ep", int64_t{1}) != local.ep) {
    return nullptr;
  }
  for (const auto& sl : t["slices"]) {
    if (sl.value("tp_rank", int64_t{0}) != local.tp_rank ||
        sl.value("ep_rank", int64_t{0}) != local.ep_rank) {
      continue;
    }
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& r : sl.at("ranges"))
      ranges.emplace_back(r[0].get<int64_t>(), r[1].get<int64_t>());
    if (sl.at("dim").get<int64_t>() == rows.dim && ranges == rows.ranges) return &sl;
  }
  return nullptr;
}

at::Tensor read_local_shard_entry(const std::string& dir, const nlohmann::json& meta,
                                  const nlohmann::json& t, const std::string& flat_name,
                                  const std::string& name, const TensorLocalizer& local) {
  const auto shape = t.at("shape").get<std::vector<int64_t>>();
  if (const auto* own = own_saved_slice(meta, t, name, local); own && own != &t) {
    // This TP (or EP) rank's own slice, as saved: one flat range of its files.
    const int64_t b = (*own)["flat"][0].get<int64_t>(), e = (*own)["flat"][1].get<int64_t>();
    auto piece = read_flat_range(dir, meta, flat_name, b, e, local.tp_rank, local.ep_rank);
    const LocalRows rows = local.rows(name);
    auto local_shape = shape;
    local_shape[rows.dim] = 0;
    for (const auto& [rb, re] : rows.ranges) local_shape[rows.dim] += re - rb;
    return piece.reshape(local_shape);
  }
  if (t.contains("flat")) {
    // Saved whole (TP rank 0's flat layout): this rank's rows of it.
    const int64_t fb = t["flat"][0].get<int64_t>();
    const int64_t tp_rank = t.value("tp_rank", int64_t{0});
    return read_local_rows(shape, local.rows(name), [&](int64_t b, int64_t n) {
      return read_flat_range(dir, meta, flat_name, fb + b, fb + b + n, tp_rank);
    });
  }
  // Slices of another layout along dim 0 (another dist.ep, or TP degree) while this rank wants
  // rows: only the saved pieces of its rows are read.
  if (local.rows(name).dim == 0 && dim0_slices(t)) {
    return read_local_rows(shape, local.rows(name), [&](int64_t b, int64_t n) {
      return read_sliced_rows(dir, meta, t, flat_name, b, n);
    });
  }
  // Slices of another TP degree: the whole tensor, then ours.
  return local(name, read_shard_entry(dir, meta, t, flat_name));
}

bool has_model_shards(const nlohmann::json& meta) {
  return meta.is_object() && meta.contains("model_shards");
}

std::set<std::string> model_shard_files(const nlohmann::json& meta) {
  std::set<std::string> out;
  if (!has_model_shards(meta)) return out;
  for (const auto& f : shards_of(meta).at("files")) out.insert(f.at("file").get<std::string>());
  return out;
}

std::set<std::string> sharded_logical_files(const nlohmann::json& meta) {
  std::set<std::string> out;
  if (!has_model_shards(meta)) return out;
  for (const auto& t : shards_of(meta).at("tensors")) out.insert(t.at("in").get<std::string>());
  return out;
}

std::string shard_file_note(const nlohmann::json& meta, const std::string& file) {
  if (!has_model_shards(meta)) return "";
  const auto& s = shards_of(meta);
  for (const auto& f : s.value("files", nlohmann::json::array())) {
    if (f.value("file", "") == file) {
      return " (the shard of rank " + std::to_string(f.value("rank", -1)) + " of " +
             layout_text(s) + ")";
    }
  }
  return "";
}

at::Tensor read_flat_range(const std::string& dir, const nlohmann::json& meta,
                           const std::string& tensor, int64_t begin, int64_t end, int64_t tp_rank,
                           int64_t ep_rank) {
  const auto& s = shards_of(meta);
  at::Tensor out;  // made when several files (or none) cover the range
  for (const auto& f : s.at("files")) {
    if (f.value("tp_rank", int64_t{0}) != tp_rank) continue;  // another TP rank's flat layout
    // Another EP rank's expert region (a file without "ep_rank" holds what every EP rank shares).
    if (f.contains("ep_rank") && f.value("ep_rank", int64_t{0}) != ep_rank) continue;
    if (f.value("by_name", false)) continue;  // no flat range
    const auto& holds = f.at("tensors");
    if (std::find(holds.begin(), holds.end(), tensor) == holds.end()) continue;
    const int64_t fb = f.at("flat")[0].get<int64_t>(), fe = f.at("flat")[1].get<int64_t>();
    const int64_t lo = std::max(begin, fb), hi = std::min(end, fe);
    if (lo >= hi) continue;
    const std::string file = f.at("file").get<std::string>();
    const std::string path = dir + "/" + file;
    if (!std::filesystem::is_regular_file(path)) {
      throw Error("checkpoint " + dir + ": shard file " + file + " is missing" +
                  shard_file_note(meta, file));
    }
    auto piece = core::read_safetensors_slice(path, tensor, lo - fb, hi - lo);
    // One file holds the whole range: its piece is the answer (no second copy of it).
    if (lo == begin && hi == end && piece.scalar_type() == at::kFloat) return piece;
    if (!out.defined()) out = at::zeros({end - begin}, at::kFloat);
    out.narrow(0, lo - begin, hi - lo).copy_(piece);
  }
  return out.defined() ? out : at::zeros({end - begin}, at::kFloat);
}

std::string model_weights_sha256(const nlohmann::json& meta) {
  const auto& files = meta.at("files");
  if (files.contains("model.safetensors") || !has_model_shards(meta)) {
    return files.at("model.safetensors").at("sha256").get<std::string>();
  }
  std::string listed;
  for (const auto& f : shards_of(meta).at("files")) {
    const std::string name = f.at("file").get<std::string>();
    if (name.compare(0, 6, "model.") == 0) listed += files.at(name).at("sha256").get<std::string>();
  }
  return core::sha256_hex(listed);
}

}  // namespace lmtrain::train
