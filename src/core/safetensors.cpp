#include "core/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace lmtrain::core {
namespace {

// Hugging Face's reader refuses headers above 100 MB; a larger length means a corrupt prefix.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

std::string supported_list() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : " ") + std::string(d.name);
  return s;
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
}

// Read-only mapping of a whole file; avoids a second in-memory copy of multi-GB checkpoints.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      throw Error("cannot stat " + path + ": " + why);
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        std::string why = std::strerror(errno);
        ::close(fd);
        throw Error("cannot map " + path + ": " + why);
      }
      data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping stays valid after close
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

SafetensorsHeader parse_header(const std::string& path, const uint8_t* data, size_t file_size) {
  const std::string where = "safetensors file " + path;
  if (file_size < 8) {
    throw Error(where + " is only " + std::to_string(file_size) +
                " bytes; too short for the 8-byte header length (truncated or not safetensors)");
  }
  const uint64_t header_len = read_le64(data);
  if (header_len > kMaxHeaderBytes) {
    throw Error(where + " declares a " + std::to_string(header_len) +
                "-byte header, which is implausible: the file is corrupt or not safetensors");
  }
  if (header_len > file_size - 8) {
    throw Error(where + " is truncated: its header needs " + std::to_string(header_len) +
                " bytes but only " + std::to_string(file_size - 8) + " follow the length prefix");
  }
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(hbegin, hbegin + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " has a malformed JSON header (corrupt file?): " + e.what());
  }
  if (!header.is_object()) throw Error(where + " has a JSON header that is not an object");

  SafetensorsHeader out;
  out.data_start = 8 + header_len;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw Error(where + ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          throw Error(where + ": __metadata__ value for '" + mk + "' is not a string");
        }
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string what = where + ", tensor '" + key + "'";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      throw Error(what + ": header entry must be an object with dtype, shape and data_offsets");
    }
    SafetensorsEntry e;
    e.name = key;
    if (!value["dtype"].is_string()) throw Error(what + ": dtype is not a string");
    e.dtype = value["dtype"].get<std::string>();
    if (!dtype_from_name(e.dtype)) {
      throw Error(what + " has dtype '" + e.dtype +
                  "', which lmtrain cannot load (supported: " + supported_list() + ")");
    }
    const auto& shape = value["shape"];
    if (!shape.is_array()) throw Error(what + ": shape is not an array");
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        throw Error(what + ": shape " + shape.dump() + " has a non-integer or negative dim");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    const auto& offs = value["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned()) {
      throw Error(what + ": data_offsets must be two non-negative integers, got " + offs.dump());
    }
    e.begin = offs[0].get<uint64_t>();
    e.end = offs[1].get<uint64_t>();
    if (e.end < e.begin) throw Error(what + ": data_offsets " + offs.dump() + " end before begin");
    if (e.end > data_size) {
      throw Error(what + " ends at data byte " + std::to_string(e.end) + " but the file has only " +
                  std::to_string(data_size) + " data bytes (truncated file?)");
    }
    // numel x element size, with overflow checks: a corrupt shape must not wrap around.
    uint64_t bytes = at::elementSize(*dtype_from_name(e.dtype));
    for (int64_t d : e.shape) {
      if (d != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d)) {
        throw Error(what + ": shape " + shape.dump() + " is too large");
      }
      bytes *= static_cast<uint64_t>(d);
    }
    if (bytes != e.end - e.begin) {
      throw Error(what + ": shape " + shape.dump() + " x " + e.dtype + " needs " +
                  std::to_string(bytes) + " bytes but data_offsets span " +
                  std::to_string(e.end - e.begin));
    }
    out.entries.push_back(std::move(e));
  }

  // The data section must be tiled exactly, in offset order (the reference reader insists too):
  // overlaps would alias tensors, gaps and trailing bytes indicate corruption.
  std::stable_sort(
      out.entries.begin(), out.entries.end(),
      [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : out.entries) {
    if (e.begin < expected) {
      throw Error(where + ": tensors '" + prev->name + "' and '" + e.name +
                  "' have overlapping data_offsets");
    }
    if (e.begin > expected) {
      throw Error(where + ": unused bytes " + std::to_string(expected) + ".." +
                  std::to_string(e.begin) + " before tensor '" + e.name + "' (corrupt header?)");
    }
    expected = e.end;
    prev = &e;
  }
  if (expected != data_size) {
    throw Error(where + " has " + std::to_string(data_size - expected) +
                " bytes after the last tensor's data (corrupt header or wrong file?)");
  }
  return out;
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (d.type == dtype) return d.name;
  }
  throw Error(std::string("dtype ") + at::toString(dtype) +
              " cannot be stored in safetensors by lmtrain (supported: " + supported_list() + ")");
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::vector<at::Tensor> cpu;  // contiguous CPU copies, kept alive until written
  cpu.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string what = "cannot write tensor '" + name + "' to " + path;
    if (name.empty() || name == "__metadata__") throw Error(what + ": reserved or empty name");
    if (header.contains(name)) throw Error(what + ": the name appears twice");
    if (!t.defined()) throw Error(what + ": the tensor is undefined");
    if (t.layout() != at::kStrided) throw Error(what + ": only dense tensors can be stored");
    const std::string dtype = safetensors_dtype_name(t.scalar_type());
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = c.nbytes();
    header[name] = {
        {"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(std::move(c));
  }
  std::string json = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (the format requires it, and it
  // lets mmap readers use the data in place).
  json.append((8 - json.size() % 8) % 8, ' ');
  uint8_t len_prefix[8];
  for (int i = 0; i < 8; ++i) len_prefix[i] = uint8_t(uint64_t(json.size()) >> (8 * i));

  AtomicFileWriter out(path);
  out.write(len_prefix, sizeof(len_prefix));
  out.write(json);
  for (const auto& c : cpu) {
    if (c.nbytes() > 0) out.write(c.data_ptr(), c.nbytes());
  }
  out.commit();
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  MappedFile f(path);
  return parse_header(path, f.data(), f.size());
}

SafetensorsFile read_safetensors(const std::string& path,
                                 std::optional<at::ScalarType> convert_floats_to) {
  MappedFile f(path);
  SafetensorsHeader header = parse_header(path, f.data(), f.size());
  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  const uint8_t* data = f.data() + header.data_start;
  for (const auto& e : header.entries) {
    const at::ScalarType dtype = *dtype_from_name(e.dtype);
    // A fresh copy, not a view of the mapping: offsets need not be aligned for the dtype, and
    // the tensors must outlive the file (which a later save may replace).
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(dtype));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    if (convert_floats_to && at::isFloatingType(dtype) && dtype != *convert_floats_to) {
      t = t.to(*convert_floats_to);
    }
    out.names.push_back(e.name);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace lmtrain::core
