#include "train/checkpoint_store.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sha256.h"

namespace lmtrain::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetaFile = "meta.json";
constexpr const char* kTmpPrefix = ".tmp_";            // a save in progress (or crashed)
constexpr const char* kReplacedPrefix = ".replaced_";  // an old dir being swapped out

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

// "a/b/" -> "a/b": filename() of a path with a trailing slash is empty.
std::string normalize(const std::string& path) {
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string base_name(const std::string& path) {
  return fs::path(normalize(path)).filename().string();
}

// Where a symlink points, as a path usable from here; nullopt if `link` is not a symlink.
std::optional<std::string> link_target(const std::string& link) {
  std::error_code ec;
  if (!fs::is_symlink(link, ec)) return std::nullopt;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) return std::nullopt;
  if (target.is_relative()) target = fs::path(link).parent_path() / target;
  return normalize(target.string());
}

// A checkpoint file name must stay inside its directory and not shadow meta.json.
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

// Parses meta.json and checks every listed file's size and checksum.
nlohmann::json verified_meta(const std::string& dir) {
  const std::string what = "checkpoint " + dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(what + " does not exist or is not a directory");
  const std::string meta_path = dir + "/" + kMetaFile;
  if (!fs::exists(meta_path, ec)) {
    throw Error(what + " is incomplete: meta.json is missing (was the save interrupted?)");
  }
  nlohmann::json meta;
  try {
    meta = read_json(meta_path);
  } catch (const Error& e) {
    throw Error(what + " is corrupt: " + e.what());
  }
  if (!meta.is_object()) throw Error(what + ": meta.json is not a JSON object");
  if (!meta.contains("format_version") || !meta["format_version"].is_number_integer()) {
    throw Error(what + ": meta.json has no integer format_version");
  }
  if (meta["format_version"].get<int64_t>() > CheckpointStore::kFormatVersion) {
    throw Error(what + " has format_version " + meta["format_version"].dump() +
                "; this lmtrain reads up to " + std::to_string(CheckpointStore::kFormatVersion) +
                " (written by a newer lmtrain?)");
  }
  if (!meta.contains("step") || !meta["step"].is_number_integer()) {
    throw Error(what + ": meta.json has no integer step");
  }
  if (!meta.contains("files") || !meta["files"].is_object()) {
    throw Error(what + ": meta.json has no \"files\" object");
  }
  for (const auto& [name, info] : meta["files"].items()) {
    check_file_name(name, what);
    if (!info.is_object() || !info.contains("sha256") || !info["sha256"].is_string() ||
        !info.contains("bytes") || !info["bytes"].is_number_unsigned()) {
      throw Error(what + ": meta.json entry for " + name + " needs \"sha256\" and \"bytes\"");
    }
    const std::string path = dir + "/" + name;
    if (!fs::is_regular_file(path, ec)) {
      throw Error(what + ": file " + name + " listed in meta.json is missing");
    }
    const uint64_t size = fs::file_size(path, ec);
    const uint64_t expected = info["bytes"].get<uint64_t>();
    if (ec || size != expected) {
      throw Error(what + ": file " + name + " is " + std::to_string(size) +
                  " bytes but meta.json records " + std::to_string(expected) +
                  " (truncated or overwritten)");
    }
    const std::string sha = core::sha256_file_hex(path);
    if (sha != info["sha256"].get<std::string>()) {
      throw Error(what + ": file " + name + " fails its sha256 check (meta.json " +
                  info["sha256"].get<std::string>() + ", file " + sha + "): the file is corrupt");
    }
  }
  return meta;
}

LoadedCheckpoint load_one(const std::string& dir, const std::vector<std::string>& tensor_files) {
  LoadedCheckpoint out;
  out.dir = dir;
  out.meta = verified_meta(dir);
  out.step = out.meta["step"].get<int64_t>();
  std::vector<std::string> wanted = tensor_files;
  if (wanted.empty()) {
    for (const auto& [name, info] : out.meta["files"].items()) {
      const std::string ext = ".safetensors";
      if (name.size() > ext.size() &&
          name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
        wanted.push_back(name);
      }
    }
  }
  for (const auto& name : wanted) {
    if (!out.meta["files"].contains(name)) {
      throw Error("checkpoint " + dir + " has no file " + name + " (meta.json lists " +
                  out.meta["files"].dump() + ")");
    }
    out.files.emplace(name, core::read_safetensors(dir + "/" + name));
  }
  return out;
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) log::warn("could not remove " + path + ": " + ec.message());
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw Error("cannot rename " + from + " to " + to + ": " + std::strerror(errno));
  }
}

}  // namespace

CheckpointStore::CheckpointStore(std::string run_dir, int keep_last)
    : run_dir_(normalize(run_dir)),
      checkpoints_dir_(run_dir_ + "/checkpoints"),
      keep_last_(keep_last) {}

std::string CheckpointStore::step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string CheckpointStore::save(int64_t step, const CheckpointFiles& files, nlohmann::json meta,
                                  std::optional<double> val_loss) {
  if (step < 0) throw Error("cannot save a checkpoint for negative step " + std::to_string(step));
  if (meta.is_null()) meta = nlohmann::json::object();
  if (!meta.is_object()) throw Error("checkpoint meta must be a JSON object, got " + meta.dump());
  core::ensure_dir(checkpoints_dir_);
  clean_debris();

  const std::string name = step_dir_name(step);
  const std::string final_dir = checkpoints_dir_ + "/" + name;
  const std::string tmp_dir = checkpoints_dir_ + "/" + kTmpPrefix + name;
  remove_tree(tmp_dir);
  try {
    core::ensure_dir(tmp_dir);
    nlohmann::json listed = nlohmann::json::object();
    auto record = [&](const std::string& file) {
      const std::string path = tmp_dir + "/" + file;
      listed[file] = {{"sha256", core::sha256_file_hex(path)}, {"bytes", fs::file_size(path)}};
    };
    auto check_new = [&](const std::string& file) {
      check_file_name(file, "saving checkpoint " + final_dir);
      if (listed.contains(file)) {
        throw Error("saving checkpoint " + final_dir + ": file " + file + " given twice");
      }
    };
    for (const auto& [file, tensors] : files.tensor_files) {
      check_new(file);
      // transformers' from_pretrained insists on format=pt in safetensors metadata.
      core::write_safetensors(tmp_dir + "/" + file, tensors, {{"format", "pt"}});
      record(file);
    }
    for (const auto& [file, bytes] : files.raw_files) {
      check_new(file);
      core::write_file_atomic(tmp_dir + "/" + file, bytes);
      record(file);
    }
    meta["step"] = step;
    meta["format_version"] = kFormatVersion;
    meta["files"] = std::move(listed);
    if (val_loss) {
      // JSON has no NaN/inf; a non-finite loss is stored as null and never becomes best.
      meta["val_loss"] = std::isfinite(*val_loss) ? nlohmann::json(*val_loss) : nlohmann::json();
    }
    // meta.json last: its presence is what marks the checkpoint complete.
    core::write_file_atomic(tmp_dir + "/" + kMetaFile, meta.dump(2) + "\n");
    core::fsync_path(tmp_dir);
    install(tmp_dir, final_dir);
  } catch (...) {
    remove_tree(tmp_dir);
    throw;
  }
  core::atomic_symlink(name, checkpoints_dir_ + "/latest");
  update_best();
  prune();
  return final_dir;
}

// Moves the finished tmp dir to its final name. A plain rename cannot replace a non-empty
// directory, so re-saving a step swaps the two atomically (RENAME_EXCHANGE) where the
// filesystem can, else parks the old dir under .replaced_ for the two-rename window;
// clean_debris() restores it if we crash inside that window.
void CheckpointStore::install(const std::string& tmp_dir, const std::string& final_dir) {
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    rename_or_throw(tmp_dir, final_dir);
    core::fsync_path(checkpoints_dir_);
    return;
  }
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    core::fsync_path(checkpoints_dir_);
    remove_tree(tmp_dir);  // now holds the old checkpoint
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    throw Error("cannot swap " + tmp_dir + " into " + final_dir + ": " + std::strerror(errno));
  }
#endif
  const std::string parked = checkpoints_dir_ + "/" + kReplacedPrefix + base_name(final_dir);
  remove_tree(parked);
  rename_or_throw(final_dir, parked);
  try {
    rename_or_throw(tmp_dir, final_dir);
  } catch (...) {
    std::rename(parked.c_str(), final_dir.c_str());
    throw;
  }
  core::fsync_path(checkpoints_dir_);
  remove_tree(parked);
}

void CheckpointStore::clean_debris() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    if (starts_with(name, kTmpPrefix)) {
      log::info("removing unfinished checkpoint " + path + " (left by an interrupted save)");
      remove_tree(path);
    } else if (starts_with(name, kReplacedPrefix)) {
      const std::string original = checkpoints_dir_ + "/" + name.substr(strlen(kReplacedPrefix));
      if (fs::exists(original + "/" + kMetaFile, ec)) {
        remove_tree(path);
      } else if (!fs::exists(original, ec)) {
        log::warn("restoring checkpoint " + original + " after an interrupted re-save");
        rename_or_throw(path, original);
      }
    } else if (entry.is_symlink(ec) && name.find(".tmp.") != std::string::npos) {
      fs::remove(entry.path(), ec);  // half-made latest/best link
    }
  }
}

void CheckpointStore::update_best() {
  std::optional<double> best_loss;
  std::string best_name;
  for (const auto& e : list(checkpoints_dir_)) {
    nlohmann::json meta;
    try {
      meta = read_json(e.dir + "/" + kMetaFile);
    } catch (const Error&) {
      continue;  // unreadable meta: not a candidate; verify() reports it when loaded
    }
    if (!meta.is_object() || !meta.contains("val_loss") || !meta["val_loss"].is_number()) continue;
    const double loss = meta["val_loss"].get<double>();
    if (!best_loss || loss < *best_loss) {  // strict: the earliest of equal losses stays best
      best_loss = loss;
      best_name = base_name(e.dir);
    }
  }
  if (!best_loss) return;
  const std::string link = checkpoints_dir_ + "/best";
  auto current = link_target(link);
  if (!current || base_name(*current) != best_name) core::atomic_symlink(best_name, link);
}

void CheckpointStore::prune() {
  if (keep_last_ <= 0) return;
  const auto entries = list(checkpoints_dir_);
  std::set<std::string> protect;
  for (const char* link : {"latest", "best"}) {
    if (auto t = link_target(checkpoints_dir_ + "/" + link)) protect.insert(base_name(*t));
  }
  const size_t n = entries.size();
  for (size_t i = 0; i + static_cast<size_t>(keep_last_) < n; ++i) {
    if (protect.count(base_name(entries[i].dir))) continue;
    log::info("removing old checkpoint " + entries[i].dir +
              " (checkpoint.keep_last=" + std::to_string(keep_last_) + ")");
    remove_tree(entries[i].dir);
  }
}

std::vector<CheckpointEntry> CheckpointStore::list(const std::string& checkpoints_dir) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    const std::string name = entry.path().filename().string();
    auto step = parse_step(name);
    if (!step || entry.is_symlink(ec) || !entry.is_directory(ec)) continue;
    if (!fs::is_regular_file(entry.path() / kMetaFile, ec)) continue;  // incomplete
    out.push_back({*step, normalize(entry.path().string())});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

std::optional<std::string> CheckpointStore::resolve(const std::string& spec,
                                                    const std::string& run_dir) {
  std::error_code ec;
  if (spec.empty() || spec == "none") return std::nullopt;
  if (spec == "auto" || spec == "latest" || spec == "best") {
    const std::string root = normalize(run_dir) + "/checkpoints";
    const std::string link = root + "/" + (spec == "best" ? "best" : "latest");
    if (auto target = link_target(link); target && fs::is_directory(*target, ec)) return target;
    if (spec == "best") return std::nullopt;
    // No usable `latest` (e.g. a crash between the rename and the link update): newest complete.
    auto entries = list(root);
    if (entries.empty()) return std::nullopt;
    return entries.back().dir;
  }
  const std::string path = normalize(spec);
  if (!fs::exists(path, ec)) {
    throw UsageError("checkpoint " + spec + " does not exist (expected a checkpoint dir, a " +
                     "latest/best link, a run dir, or auto/latest/best)");
  }
  // A link (latest, best, or the user's own): what it points to now, so a later save that
  // repoints it cannot change which checkpoint this run resumed from.
  if (auto target = link_target(path)) return resolve(*target, run_dir);
  if (fs::exists(path + "/" + kMetaFile, ec)) return path;
  if (fs::is_directory(path + "/checkpoints", ec) || base_name(path) == "checkpoints") {
    const std::string run = base_name(path) == "checkpoints" ? core::parent_dir(path) : path;
    if (auto r = resolve("latest", run)) return r;
    throw UsageError("run dir " + run + " has no checkpoints to resume from");
  }
  // An incomplete step dir: let load() report it (and fall back if allowed).
  if (parse_step(base_name(path))) return path;
  throw UsageError(spec +
                   " is not a checkpoint dir (no meta.json), a run dir, or a checkpoints/ dir");
}

void CheckpointStore::verify(const std::string& ckpt_dir) { verified_meta(ckpt_dir); }

LoadedCheckpoint CheckpointStore::load(const std::string& ckpt_dir, bool allow_fallback,
                                       const std::vector<std::string>& tensor_files) {
  const std::string dir = link_target(ckpt_dir).value_or(normalize(ckpt_dir));
  try {
    return load_one(dir, tensor_files);
  } catch (const Error& e) {
    if (!allow_fallback) throw;
    const auto own_step = parse_step(base_name(dir));
    const std::string parent = core::parent_dir(dir);
    if (!own_step) {
      throw Error(std::string(e.what()) + " (no fallback: " + dir + " is not a step_* dir)");
    }
    log::warn(std::string(e.what()) + "; looking for an older checkpoint in " + parent);
    const auto entries = list(parent);
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if (it->step >= *own_step) continue;
      try {
        LoadedCheckpoint loaded = load_one(it->dir, tensor_files);
        loaded.fell_back = true;
        log::warn("falling back to checkpoint " + it->dir + " (step " +
                  std::to_string(loaded.step) + ") because " + dir + " is unusable");
        return loaded;
      } catch (const Error& older) {
        log::warn(std::string("older checkpoint unusable too: ") + older.what());
      }
    }
    throw Error(std::string(e.what()) + "; and no valid older checkpoint exists in " + parent);
  }
}

}  // namespace lmtrain::train
