// Reading side of CheckpointStore: listing, resolving --resume specs, verification, loading
// with fallback.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sha256.h"

namespace lmtrain::train {
namespace fs = std::filesystem;
using ckpt_detail::base_name;
using ckpt_detail::check_file_name;
using ckpt_detail::kMetaFile;
using ckpt_detail::link_target;
using ckpt_detail::normalize;
using ckpt_detail::parse_epoch_link;
using ckpt_detail::parse_step;
using ckpt_detail::read_json;

namespace {

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
  for (const auto& [name, info] :
       ckpt_detail::check_meta(meta, what, CheckpointStore::kFormatVersion)) {
    const std::string path = dir + "/" + name;
    if (!fs::is_regular_file(path, ec)) {
      throw Error(what + ": file " + name + " listed in meta.json is missing" +
                  shard_file_note(meta, name));
    }
    const uint64_t size = fs::file_size(path, ec);
    const uint64_t expected = info.bytes;
    if (ec || size != expected) {
      throw Error(what + ": file " + name + " is " + std::to_string(size) +
                  " bytes but meta.json records " + std::to_string(expected) +
                  " (truncated or overwritten)" + shard_file_note(meta, name));
    }
    const std::string sha = core::sha256_file_hex(path);
    if (sha != info.sha256) {
      throw Error(what + ": file " + name + " fails its sha256 check (meta.json " + info.sha256 +
                  ", file " + sha + "): the file is corrupt" + shard_file_note(meta, name));
    }
  }
  return meta;
}

LoadedCheckpoint load_one(const std::string& dir, const std::vector<std::string>& tensor_files,
                          bool tensors_by_range) {
  LoadedCheckpoint out;
  out.dir = dir;
  out.meta = verified_meta(dir);
  out.step = out.meta["step"].get<int64_t>();
  if (tensors_by_range) return out;
  std::vector<std::string> wanted = tensor_files;
  // A sharded checkpoint's shard files are read by range where they are needed
  // (checkpoint/sharded_reader.h); the whole files they make up (model.safetensors) are
  // assembled here on request.
  const auto shard_files = model_shard_files(out.meta);
  const auto logical = sharded_logical_files(out.meta);
  if (wanted.empty()) {
    for (const auto& [name, info] : out.meta["files"].items()) {
      const std::string ext = ".safetensors";
      if (name.size() > ext.size() && !shard_files.count(name) &&
          name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
        wanted.push_back(name);
      }
    }
    wanted.insert(wanted.end(), logical.begin(), logical.end());
  }
  for (const auto& name : wanted) {
    if (logical.count(name) && !out.meta["files"].contains(name)) {
      out.files.emplace(name, assemble_sharded_file(dir, out.meta, name));
      continue;
    }
    if (!out.meta["files"].contains(name)) {
      throw Error("checkpoint " + dir + " has no file " + name + " (meta.json lists " +
                  out.meta["files"].dump() + ")");
    }
    out.files.emplace(name, core::read_safetensors(dir + "/" + name));
  }
  return out;
}

}  // namespace

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

CheckpointRequest CheckpointRequest::parse(const std::string& text) {
  using K = Kind;
  static const std::pair<const char*, Kind> kKeywords[] = {{"", K::kNone},
                                                           {"none", K::kNone},
                                                           {"auto", K::kAuto},
                                                           {"latest", K::kLatest},
                                                           {"best", K::kBest}};
  for (const auto& [word, kind] : kKeywords) {
    if (text == word) return {kind, text};
  }
  return {Kind::kPath, text};
}

std::optional<std::string> CheckpointStore::resolve(const CheckpointRequest& request,
                                                    const std::string& run_dir) {
  using Kind = CheckpointRequest::Kind;
  std::error_code ec;
  if (request.kind == Kind::kNone) return std::nullopt;
  if (request.kind != Kind::kPath) {
    const bool best = request.kind == Kind::kBest;
    const std::string root = normalize(run_dir) + "/checkpoints";
    const std::string link = root + "/" + (best ? "best" : "latest");
    if (auto target = link_target(link); target && fs::is_directory(*target, ec)) return target;
    if (best) return std::nullopt;
    // No usable `latest` (e.g. a crash between the rename and the link update): newest complete.
    auto entries = list(root);
    if (entries.empty()) return std::nullopt;
    return entries.back().dir;
  }
  const std::string& spec = request.text;
  // A bare checkpoint name (step_00000125, epoch_1_step_00000125) that is no path from here:
  // the run dir's checkpoint of that name.
  if (spec.find('/') == std::string::npos && !fs::exists(spec, ec) &&
      (parse_step(spec) || parse_epoch_link(spec))) {
    const std::string in_run = normalize(run_dir) + "/checkpoints/" + spec;
    if (fs::exists(in_run, ec) || fs::is_symlink(in_run, ec)) return resolve(in_run, run_dir);
  }
  const std::string path = normalize(spec);
  if (!fs::exists(path, ec)) {
    throw UsageError("checkpoint " + spec + " does not exist (expected a checkpoint dir, a " +
                     "latest/best/epoch_N_step_M link, a run dir, or auto/latest/best)");
  }
  // A link (latest, best, or the user's own): what it points to now, so a later save that
  // repoints it cannot change which checkpoint this run resumed from.
  if (auto target = link_target(path)) return resolve(*target, run_dir);
  if (fs::exists(path + "/" + kMetaFile, ec)) return path;
  if (fs::is_directory(path + "/checkpoints", ec) || base_name(path) == "checkpoints") {
    const std::string run = base_name(path) == "checkpoints" ? core::parent_dir(path) : path;
    if (auto r = resolve(CheckpointRequest{Kind::kLatest, "latest"}, run)) return r;
    throw UsageError("run dir " + run + " has no checkpoints to resume from");
  }
  // An incomplete step dir: let load() report it (and fall back if allowed).
  if (parse_step(base_name(path))) return path;
  // A directory `lmtrain prepare` wrote (train*.bin are token shards there, not pickles).
  if ((fs::exists(path + "/train.bin", ec) || fs::exists(path + "/train_00000.bin", ec)) &&
      fs::exists(path + "/tokenizer.json", ec)) {
    throw UsageError(spec +
                     " is a prepared data dir (lmtrain prepare: tokenizer.json, train*.bin), not a "
                     "checkpoint: give the run dir or checkpoint to load, and this dir as "
                     "--data.dir");
  }
  // E.g. the temporal-encoder pretrainer's epoch_5_step_5000/ with PyTorch pickles in it.
  std::string foreign;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".ckpt") {
        foreign = e.path().filename().string();
        break;
      }
    }
  }
  throw UsageError(spec + " is not an lmtrain checkpoint dir (no meta.json), a run dir, or a " +
                   "checkpoints/ dir" +
                   (foreign.empty() ? std::string()
                                    : "; it holds " + foreign +
                                          ", a PyTorch checkpoint another trainer wrote, which "
                                          "lmtrain cannot resume (its weights can start a run "
                                          "after `lmtrain import hf` when they are in Hugging "
                                          "Face format)"));
}

void CheckpointStore::verify(const std::string& ckpt_dir) { verified_meta(ckpt_dir); }

LoadedCheckpoint CheckpointStore::load(const std::string& ckpt_dir, bool allow_fallback,
                                       const std::vector<std::string>& tensor_files,
                                       bool tensors_by_range) {
  const std::string dir = link_target(ckpt_dir).value_or(normalize(ckpt_dir));
  try {
    return load_one(dir, tensor_files, tensors_by_range);
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
        LoadedCheckpoint loaded = load_one(it->dir, tensor_files, tensors_by_range);
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
