#include "observe/tfevents_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"

namespace lmtrain::train {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (uint64_t(field) << 3) | wire_type);
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  put_tag(out, field, kFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  put_tag(out, field, kFixed32);
  put_le(out, bits, 4);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5.
std::string encode_file_version_event(double wall_time) {
  std::string ev;
  put_double(ev, 1, wall_time);
  put_bytes(ev, 3, "brain.Event:2");
  return ev;
}

// Summary: value = 1 (repeated); Summary.Value: tag = 1 (string), simple_value = 2 (float).
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string ev;
  put_double(ev, 1, wall_time);
  put_tag(ev, 2, kVarint);
  put_varint(ev, static_cast<uint64_t>(step));  // negative int64: 10-byte two's complement
  put_bytes(ev, 5, summary);
  return ev;
}

std::string frame_tfrecord(const std::string& data) {
  std::string rec;
  rec.reserve(data.size() + 16);
  put_le(rec, data.size(), 8);
  put_le(rec, core::masked_crc32c(rec.data(), 8), 4);
  rec += data;
  put_le(rec, core::masked_crc32c(data.data(), data.size()), 4);
  return rec;
}

TfEventsWriter::TfEventsWriter(const std::string& log_dir) {
  core::ensure_dir(log_dir);
  const double now = now_seconds();
  const std::string base = log_dir + "/events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(now)) + "." + hostname();
  // Two writers started in the same second (e.g. a quick restart) must not share a file.
  path_ = base;
  for (int n = 1; std::filesystem::exists(path_); ++n) path_ = base + "." + std::to_string(n);
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) {
    throw Error("cannot create TensorBoard event file " + path_ + ": " + std::strerror(errno));
  }
  write_record(encode_file_version_event(now));
  flush();
}

TfEventsWriter::~TfEventsWriter() {
  if (file_) std::fclose(file_);
}

void TfEventsWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars({{tag, value}}, step);
}

void TfEventsWriter::add_scalars(const std::vector<std::pair<std::string, double>>& values,
                                 int64_t step) {
  if (values.empty()) return;
  write_record(encode_scalars_event(now_seconds(), step, values));
  flush();
}

void TfEventsWriter::flush() {
  if (std::fflush(file_) != 0) {
    throw Error("cannot write TensorBoard event file " + path_ + ": " + std::strerror(errno));
  }
}

void TfEventsWriter::write_record(const std::string& data) {
  const std::string rec = frame_tfrecord(data);
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size()) {
    throw Error("cannot write TensorBoard event file " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace lmtrain::train
