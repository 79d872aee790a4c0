// The YAML config loader: any document either merges or fails with a UsageError naming the
// problem; the merged config serialises and reads back to the same YAML.
#include "core/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lmtrain::fuzz::write_input(data, size, ".yaml");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    auto cfg = lmtrain::core::Config::defaults();
    cfg.merge_yaml_file(path);
    const std::string yaml = cfg.to_yaml();
    auto again = lmtrain::core::Config::defaults();
    again.merge_yaml_text(yaml, "round trip");
    if (again.to_yaml() != yaml) __builtin_trap();
  });
  return 0;
}
