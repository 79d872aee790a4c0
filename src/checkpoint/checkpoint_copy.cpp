#include "checkpoint/checkpoint_copy.h"

#include <unistd.h>

#include <filesystem>

#include "checkpoint/checkpoint_store.h"
#include "core/error.h"
#include "core/fs.h"

namespace fs = std::filesystem;

namespace lmtrain::train {

void export_checkpoint_copy(const std::string& src, const std::string& dest_in) {
  const fs::path dest = fs::absolute(dest_in).lexically_normal();
  const bool replacing = fs::exists(dest);
  if (replacing && !(fs::is_directory(dest) && fs::exists(dest / "meta.json"))) {
    throw UsageError("--save_checkpoint " + dest_in +
                     ": something that is not an lmtrain checkpoint is already there (not "
                     "overwritten; choose another path)");
  }
  if (!dest.parent_path().empty()) core::ensure_dir(dest.parent_path().string());
  const std::string tag = std::to_string(::getpid());
  const fs::path tmp = dest.string() + ".tmp-" + tag;
  fs::remove_all(tmp);
  fs::copy(src, tmp, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(tmp)) core::fsync_path(e.path().string());
  CheckpointStore::verify(tmp.string());
  if (replacing) {
    // The old copy stays whole until the new one is in place.
    const fs::path old = dest.string() + ".old-" + tag;
    fs::rename(dest, old);
    fs::rename(tmp, dest);
    fs::remove_all(old);
  } else {
    fs::rename(tmp, dest);
  }
  core::fsync_path(dest.parent_path().string());
}

}  // namespace lmtrain::train
