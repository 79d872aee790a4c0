#include "checkpoint/shard_layout_check.h"

#include <algorithm>
#include <string>
#include <utility>

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

}  // namespace

void check_model_shards(const nlohmann::json& s) {
  if (!s.is_object()) bad_shards("it is not an object");
  const int64_t world = shard_int(s, "world_size", "");
  const int64_t flat = shard_int(s, "flat_numel", "");
  if (world < 1 || flat < 0) bad_shards("world_size < 1 or flat_numel < 0");
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
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        bad_shards(where + " has a dimension that is not a count in its shape");
      }
      const int64_t n = d.get<int64_t>();
      numel = n == 0 ? 0 : (numel > (flat + 1) / n ? flat + 1 : std::min(numel * n, flat + 1));
    }
    if (t.contains("flat")) {
      const auto [b, e] = shard_range(t, where, flat);
      if (e - b != numel) bad_shards(where + "'s flat range does not hold its shape");
    } else if (t.contains("file")) {
      check_plain_name(shard_string(t, "file", where), where);
    }
  }
}

}  // namespace lmtrain::train
