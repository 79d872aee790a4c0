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
#include "core/progress.h"
#include "core/safetensors_slice.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace lmtrain::core {
namespace {

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

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

}  // namespace

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (d.type == dtype) return d.name;
  }
  throw Error(std::string("dtype ") + at::toString(dtype) +
              " cannot be stored in safetensors by lmtrain (supported: " +
              safetensors_supported_dtypes() + ")");
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata, Progress* progress) {
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
    if (progress) progress->add(static_cast<int64_t>(c.nbytes()));
  }
  out.commit();
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  MappedFile f(path);
  return parse_safetensors_header(path, f.data(), f.size());
}

SafetensorsFile read_safetensors(const std::string& path,
                                 std::optional<at::ScalarType> convert_floats_to,
                                 Progress* progress) {
  MappedFile f(path);
  SafetensorsHeader header = parse_safetensors_header(path, f.data(), f.size());
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
    if (progress) progress->add(static_cast<int64_t>(e.end - e.begin));
  }
  return out;
}

}  // namespace lmtrain::core

namespace lmtrain::core {

at::Tensor read_safetensors_slice(const std::string& path, const std::string& name, int64_t begin,
                                  int64_t count) {
  MappedFile f(path);
  const SafetensorsHeader header = parse_safetensors_header(path, f.data(), f.size());
  for (const auto& e : header.entries) {
    if (e.name != name) continue;
    const at::ScalarType dtype = *dtype_from_name(e.dtype);
    const auto elem = static_cast<int64_t>(*safetensors_element_size(e.dtype));
    const auto numel = static_cast<int64_t>(e.end - e.begin) / elem;
    const bool whole = count < 0;
    if (whole) count = numel;
    if (begin < 0 || begin + count > numel) {
      throw Error(path + ": tensor '" + name + "' has " + std::to_string(numel) +
                  " elements, cannot read [" + std::to_string(begin) + ", " +
                  std::to_string(begin + count) + ")");
    }
    at::Tensor t = whole ? at::empty(e.shape, at::TensorOptions().dtype(dtype))
                         : at::empty({count}, at::TensorOptions().dtype(dtype));
    if (count > 0) {
      std::memcpy(t.data_ptr(), f.data() + header.data_start + e.begin + begin * elem,
                  static_cast<size_t>(count * elem));
    }
    return t;
  }
  throw Error(path + " has no tensor '" + name + "'");
}

}  // namespace lmtrain::core
