// The safetensors header parser: length prefix, JSON, dtypes, shapes, data_offsets tiling.
#include "core/safetensors_header.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto header = lmtrain::core::parse_safetensors_header("fuzz", data, size);
    // What the tensor reader then relies on: every span lies inside the data section.
    for (const auto& e : header.entries) {
      if (e.end < e.begin || header.data_start + e.end > size) __builtin_trap();
    }
  });
  return 0;
}
