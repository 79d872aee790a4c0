// An offline teacher cache (`lmtrain distill-cache`): the header checks a reader makes before
// trusting the file, on arbitrary bytes. Whatever passes must describe exactly the input's size.
#include "distill/teacher_cache_format.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto layout = lmtrain::train::parse_teacher_cache(data, size, "fuzz");
    const auto& info = layout.info;
    const auto rows = static_cast<unsigned __int128>(info.windows) * info.seq_len;
    if (layout.logit_offset + rows * (info.top_k + 1) * 4 != size ||
        layout.index_offset + rows * info.top_k * 4 != layout.logit_offset ||
        info.top_k >= info.vocab_size) {
      __builtin_trap();  // accepted a file whose arrays do not fit it
    }
  });
  return 0;
}
