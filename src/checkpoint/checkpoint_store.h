// The checkpoints/ folder of a run dir (docs/architecture.md, "The run directory"):
//
//   checkpoints/step_00001000/{model.safetensors, optim.rank0.safetensors, ..., meta.json}
//   checkpoints/latest -> step_...   (relative symlink, replaced atomically)
//   checkpoints/best   -> step_...   (lowest "val_loss" in meta.json)
//   checkpoints/epoch_N_step_M -> step_M  (checkpoint.every_epoch: the checkpoint saved at the
//                                          step M that ended epoch N, counted from 1)
//
// Pruning (keep_last) removes the oldest step dirs but never the target of latest, best or any
// epoch_N_step_M link, so every epoch's checkpoint stays as long as its link does.
//
// A checkpoint is written into checkpoints/.tmp_step_X, each file fsynced, meta.json (with a
// size + sha256 per file) written last, then the directory is renamed into place. So a step_*
// dir with meta.json is complete, and a crash at any point leaves earlier checkpoints and
// `latest` intact. The store is generic: the trainer decides which tensors and files go in.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"

namespace lmtrain::train {

// Which checkpoint a run asks for (checkpoint.resume, or a checkpoint flag), parsed once: its
// keywords, or a path / checkpoint name (CheckpointStore::resolve says what each finds).
struct CheckpointRequest {
  enum class Kind { kNone, kAuto, kLatest, kBest, kPath };
  Kind kind = Kind::kNone;
  std::string text;  // as given (the path, for kPath), for messages

  // "" / "none", "auto", "latest", "best", else a path.
  static CheckpointRequest parse(const std::string& text);
  bool any() const { return kind != Kind::kNone; }
};

using TensorList = std::vector<std::pair<std::string, at::Tensor>>;

struct CheckpointFiles {
  // File name (e.g. "model.safetensors") -> tensors, written in this order.
  std::vector<std::pair<std::string, TensorList>> tensor_files;
  // File name -> raw bytes (e.g. a tokenizer or config copy); checksummed like the rest.
  std::vector<std::pair<std::string, std::string>> raw_files;
  // File name -> path of a file already written (by another rank, into staging_dir()); it is
  // moved into the checkpoint and checksummed like the rest.
  std::vector<std::pair<std::string, std::string>> moved_files;
};

struct CheckpointEntry {
  int64_t step = 0;
  std::string dir;  // .../checkpoints/step_XXXXXXXX
};

struct LoadedCheckpoint {
  std::string dir;  // the checkpoint actually loaded (differs from the request after fallback)
  int64_t step = 0;
  nlohmann::json meta;
  std::map<std::string, core::SafetensorsFile> files;  // by file name
  bool fell_back = false;
};

class CheckpointStore {
 public:
  // Bumped when the layout or meta.json schema changes incompatibly.
  static constexpr int kFormatVersion = 1;

  // keep_last <= 0 keeps every checkpoint.
  CheckpointStore(std::string run_dir, int keep_last);

  // Writes a complete checkpoint for `step` and returns its directory. meta.json holds `meta`
  // (must be an object or null) plus "step", "format_version", "files": {name: {"sha256",
  // "bytes"}} and, when given, "val_loss". Then `latest` is pointed at it, `best` at the
  // checkpoint with the lowest val_loss (earliest on ties), `ended_epoch` (N >= 1: this step
  // ended epoch N) adds the link epoch_N_step_M, and step dirs beyond keep_last are pruned
  // oldest first, never the targets of latest, best or an epoch link. Re-saving an existing
  // step swaps the new directory in atomically. Debris of interrupted saves is cleaned up first.
  std::string save(int64_t step, const CheckpointFiles& files, nlohmann::json meta,
                   std::optional<double> val_loss,
                   std::optional<int64_t> ended_epoch = std::nullopt);

  const std::string& run_dir() const { return run_dir_; }
  const std::string& checkpoints_dir() const { return checkpoints_dir_; }

  // Where ranks other than 0 write their files for `step` before rank 0's save() moves them
  // into the checkpoint (same filesystem, so the move is a rename).
  static std::string staging_dir(const std::string& run_dir, int64_t step);

  // "step_00001000" (8-digit zero pad; more digits beyond 99,999,999).
  static std::string step_dir_name(int64_t step);
  // "epoch_2_step_00001000": the link to the checkpoint of the step that ended epoch 2.
  static std::string epoch_link_name(int64_t epoch, int64_t step);

  // Turns a --resume style spec into a checkpoint dir:
  //   "auto" / "latest": RUN_DIR/checkpoints/latest, else the newest complete step dir;
  //                      nullopt when the run has no checkpoint. "" / "none": nullopt.
  //   "best":            RUN_DIR/checkpoints/best; nullopt when absent.
  //   a path:            a checkpoint dir, a latest/best/epoch_N_step_M symlink (resolved to
  //                      its target), a run dir or a checkpoints/ dir (its latest). Throws
  //                      UsageError when it does not exist or is none of these.
  //   a bare name:       step_XXXXXXXX or epoch_N_step_M that is no path from here: that
  //                      checkpoint of RUN_DIR/checkpoints/.
  static std::optional<std::string> resolve(const CheckpointRequest& request,
                                            const std::string& run_dir);
  static std::optional<std::string> resolve(const std::string& spec, const std::string& run_dir) {
    return resolve(CheckpointRequest::parse(spec), run_dir);
  }

  // Checks meta.json and every listed file's size and sha256. Throws lmtrain::Error naming the
  // checkpoint and the offending file.
  static void verify(const std::string& ckpt_dir);

  // verify() then read meta.json and the requested tensor files (empty: every .safetensors
  // file in meta). Every listed file is verified, not only the requested ones, so that all
  // ranks of a job reach the same verdict. With allow_fallback, a corrupt or incomplete
  // checkpoint is reported with log::warn and the newest valid older step dir beside it is
  // loaded instead; throws if there is none.
  // tensors_by_range: read no tensor file (files stays empty); the caller reads what it needs
  // by range (a tensor-parallel resume, checkpoint/unsharded_local_read.h).
  static LoadedCheckpoint load(const std::string& ckpt_dir, bool allow_fallback,
                               const std::vector<std::string>& tensor_files = {},
                               bool tensors_by_range = false);

  // Complete checkpoints (step_* dirs containing meta.json) in a checkpoints/ dir, by step.
  static std::vector<CheckpointEntry> list(const std::string& checkpoints_dir);

 private:
  void clean_debris(int64_t saving_step);
  void install(const std::string& tmp_dir, const std::string& final_dir);
  void update_best();
  void prune();

  std::string run_dir_;
  std::string checkpoints_dir_;
  int keep_last_;
};

}  // namespace lmtrain::train
