#include "checkpoint/rewind_guard.h"

#include <filesystem>
#include <set>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_store.h"

namespace fs = std::filesystem;

namespace lmtrain::train {

std::optional<int64_t> checkpoint_dir_step(const std::string& ckpt_dir) {
  return ckpt_detail::parse_step(ckpt_detail::base_name(ckpt_detail::normalize(ckpt_dir)));
}

std::vector<std::string> checkpoints_after(const std::string& run_dir, int64_t step) {
  const std::string root = ckpt_detail::normalize(run_dir) + "/checkpoints";
  std::vector<std::string> out;
  std::set<std::string> later;
  for (const auto& e : CheckpointStore::list(root)) {
    if (e.step <= step) continue;
    later.insert(ckpt_detail::base_name(e.dir));
    out.push_back("checkpoints/" + ckpt_detail::base_name(e.dir));
  }
  if (later.empty()) return out;
  std::set<std::string> links;  // sorted, for a stable message
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const auto target = ckpt_detail::link_target(e.path().string());
    if (target && later.count(ckpt_detail::base_name(*target))) links.insert(name);
  }
  for (const auto& name : links) out.push_back("checkpoints/" + name);
  return out;
}

}  // namespace lmtrain::train
