// Names and small file helpers shared by the checkpoint writer (checkpoint_store.cpp) and
// reader (checkpoint_reader.cpp). Internal to train/.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace lmtrain::train::ckpt_detail {

inline constexpr const char* kMetaFile = "meta.json";
inline constexpr const char* kTmpPrefix = ".tmp_";            // a save in progress (or crashed)
inline constexpr const char* kReplacedPrefix = ".replaced_";  // an old dir being swapped out

bool starts_with(const std::string& s, const std::string& prefix);
// "step_00001000" -> 1000; nullopt for anything else.
std::optional<int64_t> parse_step(const std::string& dir_name);
// "a/b/" -> "a/b": filename() of a path with a trailing slash is empty.
std::string normalize(const std::string& path);
std::string base_name(const std::string& path);
// Where a symlink points, as a path usable from here; nullopt if `link` is not a symlink.
std::optional<std::string> link_target(const std::string& link);
// A checkpoint file name must stay inside its directory and not shadow meta.json.
void check_file_name(const std::string& name, const std::string& context);
nlohmann::json read_json(const std::string& path);

}  // namespace lmtrain::train::ckpt_detail
