#include "data/temporal/npy_series.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fs.h"

namespace lmtrain::data::temporal {
namespace {

// A reader of the Python dict literal numpy writes as the header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 256), }
class NpyDictParser {
 public:
  NpyDictParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_value();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') {
          fail(
              "descr is not a simple dtype (a structured array?): only float32 or float64 "
              "arrays are read");
        }
        h.descr = string_value();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = bool_value();
        have_order = true;
      } else if (key == "shape") {
        h.shape = shape_value();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}' after the value of '" + key + "'");
    }
    ++i_;
    if (!have_descr || !have_order || !have_shape) {
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path_ + ": not a valid .npy header at byte " + std::to_string(i_) +
                " of the header: " + what);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_value() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("a string is not closed");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool bool_value() {
    for (const bool v : {true, false}) {
      const std::string word = v ? "True" : "False";
      if (s_.compare(i_, word.size(), word) == 0) {
        i_ += word.size();
        return v;
      }
    }
    fail("expected True or False");
  }
  std::vector<int64_t> shape_value() {
    expect('(');
    std::vector<int64_t> shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a dimension is too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2's long
      shape.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
      if (shape.size() > 32) fail("more than 32 dimensions");
    }
    ++i_;
    return shape;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

uint64_t npy_load_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

}  // namespace

NpyHeader parse_npy_header(const std::string& bytes, const std::string& path) {
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    throw Error(path + ": not a .npy file (no \\x93NUMPY magic at its start)");
  }
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6];
  if (major < 1 || major > 3) {
    throw Error(path + ": .npy format version " + std::to_string(major) + "." +
                std::to_string(u[7]) + " is not supported (1.0 to 3.0)");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) throw Error(path + ": truncated .npy header");
  const uint64_t header_len = npy_load_le(u + 8, static_cast<int>(len_bytes));
  const size_t start = 8 + len_bytes;
  if (header_len > bytes.size() - start) {
    throw Error(path + ": truncated .npy file: its header says " + std::to_string(header_len) +
                " bytes but only " + std::to_string(bytes.size() - start) + " follow");
  }
  const std::string text = bytes.substr(start, header_len);
  NpyHeader h = NpyDictParser(text, path).parse();
  h.data_offset = start + header_len;
  if (h.descr != "<f4" && h.descr != "<f8") {
    const bool big = (h.descr == ">f4" || h.descr == ">f8");
    throw Error(path + ": dtype '" + h.descr + "' is not supported: " +
                (big ? "big-endian; save it little-endian (a.astype('<f4'))"
                     : "only float32 and float64 arrays are read (a.astype(np.float32))"));
  }
  if (h.fortran_order) {
    throw Error(path +
                ": the array is in Fortran order; save it in C order "
                "(np.save(path, np.ascontiguousarray(a)))");
  }
  if (h.shape.empty() || h.shape.size() > 3) {
    throw Error(path + ": an array of " + std::to_string(h.shape.size()) +
                " dimensions; series are read from (L,), (N, L) or (N, C, L)");
  }
  return h;
}

std::vector<SeriesValues> parse_npy_series(const std::string& bytes, const std::string& path,
                                           const ReadOptions& options) {
  const NpyHeader h = parse_npy_header(bytes, path);
  const size_t item = h.descr == "<f4" ? 4 : 8;
  const int64_t n = h.shape.size() == 1 ? 1 : h.shape[0];
  const int64_t c = h.shape.size() == 3 ? h.shape[1] : 1;
  const int64_t l = h.shape.back();
  std::string shape_text = "(";
  for (size_t i = 0; i < h.shape.size(); ++i)
    shape_text += (i ? ", " : "") + std::to_string(h.shape[i]);
  shape_text += h.shape.size() == 1 ? ",)" : ")";
  if (n == 0) throw Error(path + ": the array of shape " + shape_text + " holds no series");
  if (c == 0 || l == 0) throw Error(path + ": the series are empty (shape " + shape_text + ")");
  // n * c * l * item without overflow (128 bits, stopped once beyond 2^64).
  const size_t available = bytes.size() - h.data_offset;
  unsigned __int128 need = item;
  bool huge = false;
  for (int64_t d : {n, c, l}) {
    need *= static_cast<uint64_t>(d);
    if (need > std::numeric_limits<uint64_t>::max()) {
      huge = true;
      break;
    }
  }
  if (need != available) {
    throw Error(
        path + ": " + (need > available ? "truncated" : "overlong") + " .npy file: shape " +
        shape_text + " of " + (item == 4 ? "float32" : "float64") + " needs " +
        (huge ? std::string("more than 2^64") : std::to_string(static_cast<uint64_t>(need))) +
        " data bytes, the file has " + std::to_string(available));
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + h.data_offset;
  std::vector<SeriesValues> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    SeriesValues v;
    v.channels = c;
    v.length = l;
    v.values.resize(static_cast<size_t>(c * l));
    v.valid.assign(v.values.size(), 1);
    for (int64_t i = 0; i < c * l; ++i) {
      const unsigned char* p = data + (static_cast<size_t>(s * c * l + i)) * item;
      double x = 0;
      if (item == 4) {
        const auto bits = static_cast<uint32_t>(npy_load_le(p, 4));
        float f = 0;
        std::memcpy(&f, &bits, 4);
        x = f;
      } else {
        const uint64_t bits = npy_load_le(p, 8);
        std::memcpy(&x, &bits, 8);
      }
      const auto where = [&] {
        return path + ": series " + std::to_string(s) +
               (h.shape.size() == 3 ? " channel " + std::to_string(i / l) : "") + " value " +
               std::to_string(i % l);
      };
      if (!std::isfinite(x) || std::fabs(x) > std::numeric_limits<float>::max()) {
        checked_series_value(x, where());  // throws, naming the position
      }
      v.values[static_cast<size_t>(i)] = static_cast<float>(x);
    }
    check_series(v, path + ": series " + std::to_string(s), options);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<SeriesValues> read_npy_series(const std::string& path, const ReadOptions& options) {
  return parse_npy_series(core::read_file(path), path, options);
}

}  // namespace lmtrain::data::temporal
