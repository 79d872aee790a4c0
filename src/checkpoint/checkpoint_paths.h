// Names and small file helpers shared by the checkpoint writer (checkpoint_store.cpp) and
// reader (checkpoint_reader.cpp). Internal to train/.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmtrain::train::ckpt_detail {

inline constexpr const char* kMetaFile = "meta.json";
inline constexpr const char* kTmpPrefix = ".tmp_";            // a save in progress (or crashed)
inline constexpr const char* kReplacedPrefix = ".replaced_";  // an old dir being swapped out

bool starts_with(const std::string& s, const std::string& prefix);
// "step_00001000" -> 1000; nullopt for anything else.
std::optional<int64_t> parse_step(const std::string& dir_name);
// "epoch_3_step_00000375" -> {3, 375} (an epoch link, checkpoint.every_epoch); nullopt for
// anything else.
std::optional<std::pair<int64_t, int64_t>> parse_epoch_link(const std::string& name);
// "a/b/" -> "a/b": filename() of a path with a trailing slash is empty.
std::string normalize(const std::string& path);
std::string base_name(const std::string& path);
// Where a symlink points, as a path usable from here; nullopt if `link` is not a symlink.
std::optional<std::string> link_target(const std::string& link);
// A checkpoint file name must stay inside its directory and not shadow meta.json.
void check_file_name(const std::string& name, const std::string& context);
nlohmann::json read_json(const std::string& path);

struct MetaFileInfo {
  std::string sha256;
  uint64_t bytes = 0;
};
// Checks the shape of a parsed meta.json (an object with integer format_version <= max_version
// and step, and "files": {name: {"sha256": str, "bytes": uint}} with plain file names) and
// returns its files in order. Throws lmtrain::Error starting with `what`. Reads no file.
std::vector<std::pair<std::string, MetaFileInfo>> check_meta(const nlohmann::json& meta,
                                                             const std::string& what,
                                                             int max_version);

}  // namespace lmtrain::train::ckpt_detail
