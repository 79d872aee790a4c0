// A checkpoint's meta.json: JSON parse, then the checks every reader applies before trusting it,
// and the structure check of a sharded checkpoint's "model_shards"
// (checkpoint/shard_layout_check.h).
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/shard_layout_check.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto meta = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) return 0;
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    for (const auto& [name, info] : lmtrain::train::ckpt_detail::check_meta(meta, "fuzz", 1)) {
      if (name.empty() || name.find('/') != std::string::npos || name == "meta.json") {
        __builtin_trap();  // check_meta must have refused it
      }
      (void)info;
    }
  });
  if (meta.is_object() && meta.contains("model_shards")) {
    lmtrain::fuzz::expect_only_lmtrain_errors(
        [&] { lmtrain::train::check_model_shards(meta["model_shards"]); });
  }
  return 0;
}
