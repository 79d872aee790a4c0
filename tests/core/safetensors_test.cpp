#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "test_util.h"

namespace lmtrain::core {
namespace {

// Expects `fn` to throw lmtrain::Error whose message contains every one of `needles`.
template <typename Fn>
void expect_error_mentions(Fn fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an lmtrain::Error";
  } catch (const Error& e) {
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
    }
  }
}

// Builds a safetensors file byte by byte from a header JSON text and raw data, exactly as the
// spec describes, so reader tests do not depend on our writer.
std::string build_file(std::string header_json, const std::string& data, bool pad = true) {
  if (pad) header_json.append((8 - header_json.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(uint64_t(header_json.size()) >> (8 * i)));
  return out + header_json + data;
}

TEST(SafetensorsTest, RoundTripEveryDtype) {
  testing::TempDir dir;
  NamedTensors in;
  const auto values = torch::tensor({1.0, -2.5, 0.1, 65504.0, -1e-3, 0.0, 3.0e38, 1e-8});
  in.emplace_back("f64", values.to(torch::kFloat64));
  in.emplace_back("f32", values.to(torch::kFloat32).reshape({2, 4}));
  in.emplace_back("f16", values.to(torch::kFloat16));  // 3e38 -> inf, 1e-8 -> subnormal/0
  in.emplace_back("bf16", values.to(torch::kBFloat16).reshape({4, 2}));
  in.emplace_back("i64", torch::tensor({INT64_MIN, int64_t(-1), INT64_MAX}));
  in.emplace_back("i32", torch::tensor({INT32_MIN, -7, INT32_MAX}, torch::kInt32));
  in.emplace_back("i16", torch::tensor({-32768, 5, 32767}, torch::kInt16));
  in.emplace_back("i8", torch::tensor({-128, 0, 127}, torch::kInt8));
  in.emplace_back("u8", torch::tensor({0, 128, 255}, torch::kUInt8));
  in.emplace_back("bool", torch::tensor({true, false, true}));
  in.emplace_back("scalar", torch::tensor(4.5));
  in.emplace_back("empty", torch::zeros({0, 3}));
  // Non-contiguous input (a transpose) must be written in logical order.
  in.emplace_back("transposed", torch::arange(6, torch::kFloat32).reshape({2, 3}).t());

  write_safetensors(dir.file("t.safetensors"), in);
  SafetensorsFile out = read_safetensors(dir.file("t.safetensors"));
  ASSERT_EQ(out.names.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& [name, t] = in[i];
    EXPECT_EQ(out.names[i], name) << "file order must follow the given order";
    const at::Tensor& r = out.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(r.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(r, t)) << name;
  }
  EXPECT_TRUE(out.metadata.empty());
}

TEST(SafetensorsTest, HeaderIsAlignedAndDataStartsAt8ByteBoundary) {
  testing::TempDir dir;
  write_safetensors(dir.file("a.safetensors"), {{"x", torch::ones({3}, torch::kInt8)}},
                    {{"k", "v"}});
  const std::string bytes = read_file(dir.file("a.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 3);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["x"]["dtype"], "I8");
  EXPECT_EQ(header["x"]["shape"], nlohmann::json::array({3}));
  EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json::array({0, 3}));
  EXPECT_EQ(header["__metadata__"]["k"], "v");
}

TEST(SafetensorsTest, MetadataRoundTrip) {
  testing::TempDir dir;
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"note", "quotes \" and unicode \xc3\xa9"}, {"empty", ""}};
  write_safetensors(dir.file("m.safetensors"), {{"w", torch::zeros({2})}}, meta);
  EXPECT_EQ(read_safetensors(dir.file("m.safetensors")).metadata, meta);
  EXPECT_EQ(read_safetensors_header(dir.file("m.safetensors")).metadata, meta);
}

TEST(SafetensorsTest, ReadsHandBuiltSpecFile) {
  testing::TempDir dir;
  // Header order differs from data order, offsets are not aligned to element sizes, and there
  // is a zero-dim tensor: all allowed by the format.
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("d":{"dtype":"F32","shape":[],"data_offsets":[13,17]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[9,13]},)"
                             R"("a":{"dtype":"F16","shape":[1,3],"data_offsets":[0,6]},)"
                             R"("c":{"dtype":"I8","shape":[3],"data_offsets":[6,9]}})";
  std::string data;
  for (uint16_t h : {0x3C00, 0x3800, 0xBE00}) data += {char(h & 0xff), char(h >> 8)};  // F16
  data += {char(-1), char(0), char(127)};                                              // I8
  for (uint16_t h : {0x3F80, 0xC000}) data += {char(h & 0xff), char(h >> 8)};          // BF16
  data += std::string("\x00\x00\x50\x40", 4);                                          // 3.25f
  write_file_atomic(dir.file("h.safetensors"), build_file(header, data));

  SafetensorsFile f = read_safetensors(dir.file("h.safetensors"));
  EXPECT_EQ(f.names, (std::vector<std::string>{"a", "c", "b", "d"}));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_TRUE(torch::equal(f.tensors.at("a"), torch::tensor({{1.0, 0.5, -1.5}}).to(torch::kHalf)));
  EXPECT_TRUE(torch::equal(f.tensors.at("c"), torch::tensor({-1, 0, 127}, torch::kInt8)));
  EXPECT_TRUE(torch::equal(f.tensors.at("b"), torch::tensor({1.0, -2.0}).to(torch::kBFloat16)));
  EXPECT_EQ(f.tensors.at("d").dim(), 0);
  EXPECT_EQ(f.tensors.at("d").item<float>(), 3.25f);

  // Unpadded headers are legal too (padding is a writer convention).
  write_file_atomic(dir.file("u.safetensors"), build_file(header, data, /*pad=*/false));
  EXPECT_EQ(read_safetensors(dir.file("u.safetensors")).names.size(), 4u);
}

TEST(SafetensorsTest, InteroperatesWithPythonStructJson) {
  const std::string python = testing::lmtrain_python();
  testing::TempDir dir;
  // Python writes a file per the spec using only struct + json ...
  testing::write_text(dir.file("write.py"), R"PY(
import json, struct, sys
ts = [("w", "F32", [2, 2], struct.pack("<4f", 1.0, -2.0, 0.5, 1e-3)),
      ("ids", "I64", [3], struct.pack("<3q", -5, 0, 1 << 40)),
      ("mask", "BOOL", [2], bytes([1, 0])),
      ("h", "F16", [2], struct.pack("<2e", 1.5, -0.25))]
header, data = {"__metadata__": {"format": "pt", "source": "python"}}, b""
for name, dt, shape, b in ts:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
)PY");
  auto r =
      testing::run_command(python + " " + dir.file("write.py") + " " + dir.file("py.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile f = read_safetensors(dir.file("py.safetensors"));
  EXPECT_EQ(f.names, (std::vector<std::string>{"w", "ids", "mask", "h"}));
  EXPECT_EQ(f.metadata.at("source"), "python");
  EXPECT_TRUE(torch::equal(f.tensors.at("w"), torch::tensor({{1.0f, -2.0f}, {0.5f, 1e-3f}})));
  EXPECT_TRUE(torch::equal(f.tensors.at("ids"),
                           torch::tensor({int64_t(-5), int64_t(0), int64_t(1) << 40})));
  EXPECT_TRUE(torch::equal(f.tensors.at("mask"), torch::tensor({true, false})));
  EXPECT_TRUE(torch::equal(f.tensors.at("h"), torch::tensor({1.5, -0.25}).to(torch::kHalf)));

  // ... and decodes ours with its own reading of the spec.
  write_safetensors(dir.file("cpp.safetensors"),
                    {{"a", torch::tensor({0.5f, -4.0f})},
                     {"b", torch::tensor({1.0, -2.0}).to(torch::kBFloat16)},
                     {"c", torch::tensor({7, -9}, torch::kInt32)}},
                    {{"format", "pt"}});
  testing::write_text(dir.file("read.py"), R"PY(
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n, = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
fmt = {"F32": "f", "I32": "i", "F16": "e", "I64": "q"}
out = {"__metadata__": header.pop("__metadata__", {})}
for name, e in header.items():
    b = data[e["data_offsets"][0]:e["data_offsets"][1]]
    if e["dtype"] == "BF16":
        out[name] = [struct.unpack("<f", struct.pack("<I", v << 16))[0]
                     for v in struct.unpack("<%dH" % (len(b) // 2), b)]
    else:
        c = fmt[e["dtype"]]
        out[name] = list(struct.unpack("<%d%s" % (len(b) // struct.calcsize(c), c), b))
print(json.dumps(out, sort_keys=True))
)PY");
  r = testing::run_command(python + " " + dir.file("read.py") + " " + dir.file("cpp.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto decoded = nlohmann::json::parse(r.output);
  EXPECT_EQ(decoded["a"], nlohmann::json::array({0.5, -4.0}));
  EXPECT_EQ(decoded["b"], nlohmann::json::array({1.0, -2.0}));
  EXPECT_EQ(decoded["c"], nlohmann::json::array({7, -9}));
  EXPECT_EQ(decoded["__metadata__"]["format"], "pt");
}

// The `safetensors` library itself (the venv's) loads a file of every dtype we write, with our
// names, dtypes, shapes and bytes.
TEST(SafetensorsTest, SafetensorsLibraryReadsEveryDtype) {
  testing::TempDir dir;
  torch::manual_seed(3);
  const auto x = torch::randn({3, 5});
  const NamedTensors tensors = {{"f64", x.to(torch::kDouble)},
                                {"f32", x},
                                {"f16", x.to(torch::kHalf)},
                                {"bf16", x.to(torch::kBFloat16)},
                                {"i64", torch::arange(-4, 4)},
                                {"i32", torch::arange(7, torch::kInt32)},
                                {"i16", torch::arange(3, torch::kInt16)},
                                {"i8", torch::arange(-3, 3, torch::kInt8)},
                                {"u8", torch::arange(9, torch::kUInt8).view({3, 3})},
                                {"bool", torch::tensor({true, false, true})},
                                {"scalar", torch::tensor(2.5f)},
                                {"empty", torch::zeros({0, 4})}};
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "dtypes"}});
  auto r = testing::run_hf_check("safetensors " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto py = testing::check_result(r)[path];
  EXPECT_EQ(py["metadata"]["note"], "dtypes");
  ASSERT_EQ(py["tensors"].size(), tensors.size());
  const std::map<std::string, std::string> dtype = {
      {"f64", "float64"}, {"f32", "float32"}, {"f16", "float16"},    {"bf16", "bfloat16"},
      {"i64", "int64"},   {"i32", "int32"},   {"i16", "int16"},      {"i8", "int8"},
      {"u8", "uint8"},    {"bool", "bool"},   {"scalar", "float32"}, {"empty", "float32"}};
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const auto& e = py["tensors"][name];
    EXPECT_EQ(e["dtype"], dtype.at(name));
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), t.sizes().vec());
    const auto c = t.contiguous();
    EXPECT_EQ(e["sha256"], sha256_hex(c.data_ptr(), c.nbytes()));
  }
}

TEST(SafetensorsTest, ConvertsFloatsOnly) {
  testing::TempDir dir;
  write_safetensors(dir.file("c.safetensors"),
                    {{"w", torch::tensor({1.5, -2.0}).to(torch::kBFloat16)},
                     {"step", torch::tensor({int64_t(42)})}});
  SafetensorsFile f = read_safetensors(dir.file("c.safetensors"), torch::kFloat32);
  EXPECT_EQ(f.tensors.at("w").scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(f.tensors.at("w"), torch::tensor({1.5f, -2.0f})));
  EXPECT_EQ(f.tensors.at("step").scalar_type(), torch::kInt64);
}

TEST(SafetensorsTest, TruncatedFileRejected) {
  testing::TempDir dir;
  const std::string path = dir.file("t.safetensors");
  write_safetensors(path, {{"w", torch::arange(100, torch::kFloat32)}});
  const std::string whole = read_file(path);

  write_file_atomic(path, whole.substr(0, whole.size() - 10));  // data cut short
  expect_error_mentions([&] { read_safetensors(path); }, {path, "'w'", "truncated"});
  write_file_atomic(path, whole.substr(0, 20));  // header cut short
  expect_error_mentions([&] { read_safetensors(path); }, {path, "truncated"});
  write_file_atomic(path, whole.substr(0, 5));  // not even the length prefix
  expect_error_mentions([&] { read_safetensors(path); }, {path, "too short"});
  write_file_atomic(path, whole + "junk");  // trailing bytes
  expect_error_mentions([&] { read_safetensors(path); }, {path, "after the last tensor"});
}

TEST(SafetensorsTest, CorruptHeaderRejected) {
  testing::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  write_safetensors(path, {{"w", torch::ones({4})}});
  std::string bytes = read_file(path);
  bytes[8] = 'X';  // the JSON's opening brace
  write_file_atomic(path, bytes);
  expect_error_mentions([&] { read_safetensors(path); }, {path, "malformed JSON header"});

  bytes = read_file(path);
  bytes[7] = 0x40;  // absurd header length
  write_file_atomic(path, bytes);
  expect_error_mentions([&] { read_safetensors(path); }, {path, "implausible"});
}

TEST(SafetensorsTest, InvalidHeaderEntriesRejected) {
  testing::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string eight(8, '\0');
  auto check = [&](const std::string& header, const std::string& data,
                   std::initializer_list<std::string> needles) {
    write_file_atomic(path, build_file(header, data));
    expect_error_mentions([&] { read_safetensors(path); }, needles);
  };
  check(R"({"x":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", eight,
        {path, "'x'", "dtype 'Q7'"});
  check(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
        {path, "'x'", "needs 12 bytes"});
  check(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
        eight, {path, "overlapping"});
  check(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight, {path, "unused bytes"});
  check(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight,
        {path, "'x'", "truncated"});
  check(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight, {path, "negative"});
  check(R"({"x":{"dtype":"F32","shape":[2]}})", eight, {path, "data_offsets"});
  check(R"({"__metadata__":{"n":1}})", "", {path, "not a string"});
  check(R"([1,2])", "", {path, "not an object"});
}

TEST(SafetensorsTest, FailedWriteKeepsOldFile) {
  testing::TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"w", torch::ones({2})}});
  const std::string before = read_file(path);
  EXPECT_THROW(write_safetensors(path, {{"w", torch::ones({2})}, {"w", torch::ones({2})}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"u", at::Tensor()}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"c", torch::ones({2}, torch::kComplexFloat)}}), Error);
  EXPECT_EQ(read_file(path), before);
}

}  // namespace
}  // namespace lmtrain::core
