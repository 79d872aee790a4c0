#include "checkpoint/checkpoint_paths.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/fs.h"

namespace lmtrain::train::ckpt_detail {
namespace fs = std::filesystem;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::optional<int64_t> parse_step(const std::string& dir_name) {
  const std::string prefix = "step_";
  if (!starts_with(dir_name, prefix) || dir_name.size() == prefix.size() ||
      dir_name.size() > prefix.size() + 18) {
    return std::nullopt;
  }
  int64_t step = 0;
  for (size_t i = prefix.size(); i < dir_name.size(); ++i) {
    if (dir_name[i] < '0' || dir_name[i] > '9') return std::nullopt;
    step = step * 10 + (dir_name[i] - '0');
  }
  return step;
}

std::optional<std::pair<int64_t, int64_t>> parse_epoch_link(const std::string& name) {
  const std::string prefix = "epoch_";
  if (!starts_with(name, prefix)) return std::nullopt;
  const size_t sep = name.find('_', prefix.size());
  if (sep == std::string::npos || sep == prefix.size() || sep > prefix.size() + 18) {
    return std::nullopt;
  }
  int64_t epoch = 0;
  for (size_t i = prefix.size(); i < sep; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    epoch = epoch * 10 + (name[i] - '0');
  }
  const auto step = parse_step(name.substr(sep + 1));
  if (!step) return std::nullopt;
  return std::make_pair(epoch, *step);
}

std::string normalize(const std::string& path) {
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string base_name(const std::string& path) {
  return fs::path(normalize(path)).filename().string();
}

std::optional<std::string> link_target(const std::string& link) {
  std::error_code ec;
  if (!fs::is_symlink(link, ec)) return std::nullopt;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) return std::nullopt;
  if (target.is_relative()) target = fs::path(link).parent_path() / target;
  return normalize(target.string());
}

void check_file_name(const std::string& name, const std::string& context) {
  if (name.empty() || name == kMetaFile || name[0] == '.' || name.find('/') != std::string::npos) {
    throw Error(context + ": invalid checkpoint file name '" + name +
                "' (must be a plain file name, not meta.json, not starting with '.')");
  }
}

nlohmann::json read_json(const std::string& path) {
  const std::string text = core::read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is not valid JSON (" + e.what() + ")");
  }
}

std::vector<std::pair<std::string, MetaFileInfo>> check_meta(const nlohmann::json& meta,
                                                             const std::string& what,
                                                             int max_version) {
  if (!meta.is_object()) throw Error(what + ": meta.json is not a JSON object");
  if (!meta.contains("format_version") || !meta["format_version"].is_number_integer()) {
    throw Error(what + ": meta.json has no integer format_version");
  }
  if (meta["format_version"].get<int64_t>() > max_version) {
    throw Error(what + " has format_version " + meta["format_version"].dump() +
                "; this lmtrain reads up to " + std::to_string(max_version) +
                " (written by a newer lmtrain?)");
  }
  if (!meta.contains("step") || !meta["step"].is_number_integer()) {
    throw Error(what + ": meta.json has no integer step");
  }
  if (!meta.contains("files") || !meta["files"].is_object()) {
    throw Error(what + ": meta.json has no \"files\" object");
  }
  std::vector<std::pair<std::string, MetaFileInfo>> files;
  for (const auto& [name, info] : meta["files"].items()) {
    check_file_name(name, what);
    if (!info.is_object() || !info.contains("sha256") || !info["sha256"].is_string() ||
        !info.contains("bytes") || !info["bytes"].is_number_unsigned()) {
      throw Error(what + ": meta.json entry for " + name + " needs \"sha256\" and \"bytes\"");
    }
    files.push_back({name, {info["sha256"].get<std::string>(), info["bytes"].get<uint64_t>()}});
  }
  return files;
}

}  // namespace lmtrain::train::ckpt_detail
