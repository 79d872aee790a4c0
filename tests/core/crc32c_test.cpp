#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lmtrain::core {
namespace {

TEST(Crc32cTest, CheckValue) { EXPECT_EQ(crc32c(std::string("123456789")), 0xE3069283u); }

// RFC 3720 (iSCSI) appendix B.4 vectors.
TEST(Crc32cTest, Rfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec.data(), dec.size()), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32cTest, IncrementalMatchesOneShotAtAnyAlignment) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = crc32c(s);
  for (size_t split : {0u, 1u, 3u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    uint32_t c = crc32c(s.data(), split);
    c = crc32c(s.data() + split, s.size() - split, c);
    EXPECT_EQ(c, whole) << "split at " << split;
  }
  // Unaligned start pointers go through the same slicing path.
  EXPECT_EQ(crc32c(s.data() + 1, 999), crc32c(s.substr(1)));
}

TEST(Crc32cTest, TensorBoardMask) {
  EXPECT_EQ(masked_crc32c(0u), 0xa282ead8u);
  const uint32_t crc = crc32c(std::string("123456789"));
  const uint32_t masked = masked_crc32c(crc);
  // Unmasking (as TensorFlow's reader does) recovers the CRC.
  const uint32_t rot = masked - 0xa282ead8u;
  EXPECT_EQ((rot >> 17) | (rot << 15), crc);
  EXPECT_EQ(masked_crc32c("123456789", 9), masked);
}

}  // namespace
}  // namespace lmtrain::core
