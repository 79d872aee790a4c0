#include "checkpoint/shard_layout_check.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace lmtrain::train {
namespace {

[[noreturn]] void bad_shards(const std::string& what) {
  throw Error("checkpoint: meta.json's model_shards: " + what);
}

int64_t shard_int(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) {
    bad_shards((where.empty() ? "it" : where) + " has no integer \"" + key + "\"");
  }
  return j[key].get<int64_t>();
}

const std::string& shard_string(const nlohmann::json& j, const char* key,
                                const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) {
    bad_shards((where.empty() ? "it" : where) + " has no string \"" + key + "\"");
  }
  return j[key].get_ref<const std::string&>();
}

// A file name the checkpoint directory holds: no path, so nothing outside it is ever read.
void check_plain_name(const std::string& name, const std::string& where) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    bad_shards(where + " names '" + name + "', which is not a file of the checkpoint");
  }
}

// [begin, end) within [0, limit].
std::pair<int64_t, int64_t> shard_range(const nlohmann::json& j, const std::string& where,
                                        int64_t limit) {
  const auto& r = j.contains("flat") ? j["flat"] : nlohmann::json();
  if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer()) {
    bad_shards(where + " has no \"flat\": [begin, end]");
  }
  const int64_t b = r[0].get<int64_t>(), e = r[1].get<int64_t>();
  if (b < 0 || e < b || e > limit) {
    bad_shards(where + "'s flat range [" + std::to_string(b) + ", " + std::to_string(e) +
               ") is outside the flat layout of " + std::to_string(limit) + " elements");
  }
  return {b, e};
}

// An integer key that may be absent (then `fallback`), else within [0, limit).
int64_t optional_index(const nlohmann::json& j, const char* key, int64_t limit,
                       const std::string& where) {
  if (!j.contains(key)) return 0;
  const int64_t v = shard_int(j, key, where);
  if (v < 0 || v >= limit) {
    bad_shards(where + " has " + key + " " + std::to_string(v) + " outside [0, " +
               std::to_string(limit) + ")");
  }
  return v;
}

// A tensor-parallel (or expert-parallel) tensor's "slices": each a TP (EP) rank's local tensor at
// a flat range, its dim cut to ranges that, over all slices, cover the full dim once.
void check_tp_slices(const nlohmann::json& t, const std::vector<int64_t>& shape, int64_t tp,
                     int64_t ep, int64_t flat, const std::string& where) {
  const auto& slices = t["slices"];
  if (!slices.is_array() || slices.empty()) bad_shards(where + "'s \"slices\" is not a list");
  std::vector<std::pair<int64_t, int64_t>> covered;
  int64_t first_dim = -1;
  for (const auto& sl : slices) {
    if (!sl.is_object()) bad_shards(where + " has a slice that is not an object");
    optional_index(sl, "tp_rank", tp, where + "'s slice");
    optional_index(sl, "ep_rank", ep, where + "'s slice");
    const int64_t dim = shard_int(sl, "dim", where + "'s slice");
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) {
      bad_shards(where + "'s slice cuts dimension " + std::to_string(dim) + " of a " +
                 std::to_string(shape.size()) + "-d shape");
    }
    if (first_dim >= 0 && dim != first_dim) bad_shards(where + "'s slices cut different dims");
    first_dim = dim;
    const auto& ranges = sl.contains("ranges") ? sl["ranges"] : nlohmann::json();
    if (!ranges.is_array() || ranges.empty()) bad_shards(where + "'s slice has no \"ranges\"");
    int64_t rows = 0;
    for (const auto& r : ranges) {
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() ||
          !r[1].is_number_integer()) {
        bad_shards(where + "'s slice has a range that is not [begin, end]");
      }
      const int64_t b = r[0].get<int64_t>(), e = r[1].get<int64_t>();
      if (b < 0 || e <= b || e > shape[dim]) {
        bad_shards(where + "'s slice range [" + std::to_string(b) + ", " + std::to_string(e) +
                   ") is outside dimension " + std::to_string(dim) + " of " +
                   std::to_string(shape[dim]));
      }
      rows += e - b;
      covered.emplace_back(b, e);
    }
    // The local tensor's elements: the full shape with `dim` cut to `rows` (capped as above).
    int64_t numel = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      const int64_t n = static_cast<int64_t>(i) == dim ? rows : shape[i];
      numel = n == 0 ? 0 : (numel > (flat + 1) / n ? flat + 1 : std::min(numel * n, flat + 1));
    }
    const auto [b, e] = shard_range(sl, where + "'s slice", flat);
    if (e - b != numel) bad_shards(where + "'s slice's flat range does not hold its ranges");
  }
  std::sort(covered.begin(), covered.end());
  int64_t next = 0;  // the ranges, sorted, must follow each other from 0 to the dim's size
  for (const auto& [b, e] : covered) next = b == next ? e : -1;
  if (next != shape[first_dim]) {
    bad_shards(where + "'s slices do not cover dimension " + std::to_string(first_dim) +
               " exactly once");
  }
}

}  // namespace

void check_model_shards(const nlohmann::json& s) {
  if (!s.is_object()) bad_shards("it is not an object");
  const int64_t world = shard_int(s, "world_size", "");
  const int64_t flat = shard_int(s, "flat_numel", "");
  if (world < 1 || flat < 0) bad_shards("world_size < 1 or flat_numel < 0");
  const int64_t tp = s.contains("tp") ? shard_int(s, "tp", "") : 1;
  if (tp < 1 || tp > world) bad_shards("tp " + std::to_string(tp) + " is not in [1, world_size]");
  const int64_t ep = s.contains("ep") ? shard_int(s, "ep", "") : 1;
  if (ep < 1 || ep > world) bad_shards("ep " + std::to_string(ep) + " is not in [1, world_size]");
  if (!s.contains("files") || !s["files"].is_array() || !s.contains("tensors") ||
      !s["tensors"].is_array()) {
    bad_shards("it needs the arrays \"files\" and \"tensors\"");
  }
  for (const auto& f : s["files"]) {
    if (!f.is_object()) bad_shards("a file entry is not an object");
    const std::string& name = shard_string(f, "file", "a file entry");
    const std::string where = "file " + name;
    check_plain_name(name, where);
    const int64_t rank = shard_int(f, "rank", where);
    if (rank < 0 || rank >= world) bad_shards(where + " has rank " + std::to_string(rank));
    optional_index(f, "tp_rank", tp, where);
    optional_index(f, "ep_rank", ep, where);
    if (f.contains("by_name")) {
      // Optimizer state by name (Muon under dist.tp): no flat range, no list.
      if (!f["by_name"].is_boolean() || !f["by_name"].get<bool>()) {
        bad_shards(where + "'s \"by_name\" is not true");
      }
      continue;
    }
    if (!f.contains("tensors") || !f["tensors"].is_array()) bad_shards(where + " lists no tensors");
    for (const auto& t : f["tensors"]) {
      if (!t.is_string()) bad_shards(where + " lists a tensor name that is not a string");
    }
    shard_range(f, where, flat);
  }
  for (const auto& t : s["tensors"]) {
    if (!t.is_object()) bad_shards("a tensor entry is not an object");
    const std::string where = "tensor '" + shard_string(t, "name", "a tensor entry") + "'";
    shard_string(t, "in", where);
    if (!t.contains("shape") || !t["shape"].is_array()) bad_shards(where + " has no shape");
    // Elements, capped at flat + 1 (enough to tell a flat range too small; never overflows).
    int64_t numel = 1;
    std::vector<int64_t> shape;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        bad_shards(where + " has a dimension that is not a count in its shape");
      }
      const int64_t n = d.get<int64_t>();
      shape.push_back(n);
      numel = n == 0 ? 0 : (numel > (flat + 1) / n ? flat + 1 : std::min(numel * n, flat + 1));
    }
    if ((t.contains("flat") || t.contains("slices")) && t.contains("segment") &&
        !t["segment"].is_string()) {
      bad_shards(where + "'s \"segment\" is not a string");
    }
    if (t.contains("flat")) {
      optional_index(t, "tp_rank", tp, where);
      const auto [b, e] = shard_range(t, where, flat);
      if (e - b != numel) bad_shards(where + "'s flat range does not hold its shape");
    } else if (t.contains("slices")) {
      check_tp_slices(t, shape, tp, ep, flat, where);
    } else if (t.contains("file")) {
      check_plain_name(shard_string(t, "file", where), where);
    }
  }
}

}  // namespace lmtrain::train
