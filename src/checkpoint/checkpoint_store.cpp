#include "checkpoint/checkpoint_store.h"

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
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sha256.h"

namespace lmtrain::train {
namespace fs = std::filesystem;
using ckpt_detail::base_name;
using ckpt_detail::check_file_name;
using ckpt_detail::kMetaFile;
using ckpt_detail::kReplacedPrefix;
using ckpt_detail::kTmpPrefix;
using ckpt_detail::link_target;
using ckpt_detail::normalize;
using ckpt_detail::parse_epoch_link;
using ckpt_detail::read_json;
using ckpt_detail::starts_with;

namespace {

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

std::string CheckpointStore::epoch_link_name(int64_t epoch, int64_t step) {
  return "epoch_" + std::to_string(epoch) + "_" + step_dir_name(step);
}

std::string CheckpointStore::staging_dir(const std::string& run_dir, int64_t step) {
  return run_dir + "/checkpoints/.shards_" + step_dir_name(step);
}

std::string CheckpointStore::save(int64_t step, const CheckpointFiles& files, nlohmann::json meta,
                                  std::optional<double> val_loss,
                                  std::optional<int64_t> ended_epoch) {
  if (step < 0) throw Error("cannot save a checkpoint for negative step " + std::to_string(step));
  if (ended_epoch && *ended_epoch < 1) {
    throw Error("saving checkpoint " + step_dir_name(step) + ": ended epoch " +
                std::to_string(*ended_epoch) + " (epochs count from 1)");
  }
  if (meta.is_null()) meta = nlohmann::json::object();
  if (!meta.is_object()) throw Error("checkpoint meta must be a JSON object, got " + meta.dump());
  core::ensure_dir(checkpoints_dir_);
  clean_debris(step);

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
    for (const auto& [file, source] : files.moved_files) {
      check_new(file);
      std::error_code ec;
      fs::rename(source, tmp_dir + "/" + file, ec);
      if (ec) {
        throw Error("saving checkpoint " + final_dir + ": cannot move " + source +
                    " in: " + ec.message());
      }
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
  // Before pruning, which keeps what epoch links point to.
  if (ended_epoch) {
    core::atomic_symlink(name, checkpoints_dir_ + "/" + epoch_link_name(*ended_epoch, step));
  }
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

void CheckpointStore::clean_debris(int64_t saving_step) {
  std::error_code ec;
  // The other ranks' files of the step being saved wait in its staging dir; another step's
  // staging dir was left by a save that never completed (a rank died before the barrier).
  const std::string own_staging = base_name(staging_dir(run_dir_, saving_step));
  for (const auto& entry : fs::directory_iterator(checkpoints_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    if (starts_with(name, ".shards_") && name != own_staging) {
      log::info("removing " + path + " (shard files of an interrupted save)");
      remove_tree(path);
    } else if (starts_with(name, kTmpPrefix)) {
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
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir_, ec)) {
    if (!parse_epoch_link(entry.path().filename().string())) continue;
    if (auto t = link_target(entry.path().string())) protect.insert(base_name(*t));
  }
  const size_t n = entries.size();
  for (size_t i = 0; i + static_cast<size_t>(keep_last_) < n; ++i) {
    if (protect.count(base_name(entries[i].dir))) continue;
    log::info("removing old checkpoint " + entries[i].dir +
              " (checkpoint.keep_last=" + std::to_string(keep_last_) + ")");
    remove_tree(entries[i].dir);
  }
}

}  // namespace lmtrain::train
