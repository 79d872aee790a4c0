#include "core/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::core {
namespace {

// FIPS 180-2 appendix B / NIST example vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, MillionAInOddChunks) {
  const std::string kExpected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  const std::string a(1000000, 'a');
  EXPECT_EQ(sha256_hex(a), kExpected);
  // Chunk sizes straddling the 64-byte block boundary exercise the buffering paths.
  Sha256 h;
  size_t pos = 0, chunk = 1;
  while (pos < a.size()) {
    size_t n = std::min(chunk, a.size() - pos);
    h.update(a.data() + pos, n);
    pos += n;
    chunk = chunk * 7 % 193 + 1;
  }
  EXPECT_EQ(h.hex_digest(), kExpected);
}

TEST(Sha256Test, PaddingBoundaries) {
  // Lengths around 55/56/64 bytes change how many padding blocks are needed; compare one-shot
  // against byte-at-a-time updates for each.
  for (size_t len : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u}) {
    std::string s(len, 'x');
    Sha256 h;
    for (char c : s) h.update(&c, 1);
    EXPECT_EQ(h.hex_digest(), sha256_hex(s)) << "length " << len;
  }
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256Test, PortableAndHardwarePathsAgree) {
  // Where the CPU has SHA extensions the default path uses them; the portable code must give
  // the same digests (and is what runs elsewhere).
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 2654435761u >> 13));
  for (size_t len : {0u, 3u, 64u, 100u, 1000u, 4096u, 99999u}) {
    Sha256 portable(/*allow_hardware=*/false), fast;
    portable.update(data.data(), len);
    fast.update(data.data(), len);
    EXPECT_EQ(portable.hex_digest(), fast.hex_digest()) << "length " << len;
  }
  Sha256 portable(false);
  portable.update(std::string("abc"));
  EXPECT_EQ(portable.hex_digest(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, FileMatchesBufferAndSha256sum) {
  testing::TempDir dir;
  std::string data;
  for (int i = 0; i < 5000000; ++i) data.push_back(static_cast<char>((i * 131) >> 3));
  testing::write_text(dir.file("blob"), data);
  const std::string hex = sha256_file_hex(dir.file("blob"));
  EXPECT_EQ(hex, sha256_hex(data));
  auto r = testing::run_command("sha256sum " + dir.file("blob"));
  if (r.exit_code == 0) {
    EXPECT_EQ(r.output.substr(0, 64), hex);
  }
}

TEST(Sha256Test, MissingFileNamesPath) {
  try {
    sha256_file_hex("/nonexistent/dir/file.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file.bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace lmtrain::core
