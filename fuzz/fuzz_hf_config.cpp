// The Hugging Face config.json reader: JSON -> lmtrain config overrides, which must then be
// valid config values or fail with a UsageError.
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "fuzz_util.h"
#include "interop/hf_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;  // not JSON: the reader's JSON parse fails first
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    auto cfg = lmtrain::core::Config::defaults();
    for (const auto& [key, value] : lmtrain::model::hf::config_overrides(json)) {
      cfg.set(key, value, "config.json");
    }
  });
  return 0;
}
