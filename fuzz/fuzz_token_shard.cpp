// The token-shard reader (header checks, then every id through at() and copy_window()).
#include <vector>

#include "data/token_shard.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lmtrain::fuzz::write_input(data, size, ".bin");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    lmtrain::data::TokenShard shard(path);
    shard.set_vocab_size(384);
    std::vector<int64_t> window(33);
    for (size_t start = 0; start + window.size() <= shard.size(); start += window.size()) {
      shard.copy_window(start, window.size(), window.data());
    }
    for (size_t i = 0; i < shard.size() && i < 4096; ++i) shard.at(i);
    shard.at(shard.size());  // past the end: must throw, not read
  });
  return 0;
}
