// CRC-32C (Castagnoli polynomial), the checksum of TFRecord framing in TensorBoard event files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmtrain::core {

// CRC-32C of `n` bytes. Pass a previous result as `crc` to continue a running checksum.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32c(const std::string& s) { return crc32c(s.data(), s.size()); }

// TensorFlow's "masked" CRC: storing the CRC of data that itself contains CRCs is weak,
// so TFRecord stores a rotated-and-offset value instead.
inline uint32_t masked_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t masked_crc32c(const void* data, size_t n) { return masked_crc32c(crc32c(data, n)); }

}  // namespace lmtrain::core
