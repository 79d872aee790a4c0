// The readers of real time-series data (issue 26): CSV, NPY (written by numpy here) and
// ChatTS JSONL, and read_series_file. Good files give the values and masks; every bad file is
// a bad-data Error (exit 1) naming the file and the position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/temporal/csv_series.h"
#include "data/temporal/generator.h"
#include "data/temporal/npy_series.h"
#include "data/temporal/series_file.h"
#include "data/temporal/temporal_jsonl.h"
#include "data/temporal/timestamp_cell.h"
#include "test_util.h"

namespace lmtrain::data::temporal {
namespace {

using testing::TempDir;
using testing::write_text;

// The error `fn` throws must hold every one of `parts`, and be bad data (exit 1), not a
// UsageError (exit 2), unless `usage`: a path that names no readable series file.
template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts, bool usage = false) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming " << parts.at(0);
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e) != nullptr, usage) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

// ---- CSV ----

TEST(TemporalCsv, ReadsAColumnPerSeriesSkippingTheTimestampAndMaskingEmptyCells) {
  TempDir dir;
  const std::string path = dir.file("s.csv");
  write_text(path,
             "date,\"load, kW\",temp\r\n"
             "2024-01-01,1.5,-3\r\n"
             "2024-01-02,,2e1\r\n"
             "\r\n"
             "2024-01-03,+4,  7.25 \r\n");
  const CsvSeries c = read_csv_series(path, {});
  EXPECT_EQ(c.timestamp_column, "date");
  ASSERT_EQ(c.names, (std::vector<std::string>{"load, kW", "temp"}));
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_EQ(c.series[0].length, 3);
  EXPECT_EQ(c.series[0].channels, 1);
  EXPECT_EQ(c.series[0].values, (std::vector<float>{1.5f, 0.0f, 4.0f}));
  EXPECT_EQ(c.series[0].valid, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(c.series[1].values, (std::vector<float>{-3.0f, 20.0f, 7.25f}));
  EXPECT_EQ(c.series[1].valid, (std::vector<uint8_t>{1, 1, 1}));

  // A numeric timestamp column is found by its name; without one every column is a series.
  write_text(path, "a,Time,b\n1,100,2\n3,101,4\n");
  const CsvSeries named = read_csv_series(path, {});
  EXPECT_EQ(named.timestamp_column, "Time");
  EXPECT_EQ(named.names, (std::vector<std::string>{"a", "b"}));
  write_text(path, "x,y\n1,2\n3,4\n");
  const CsvSeries plain = read_csv_series(path, {});
  EXPECT_EQ(plain.timestamp_column, "");
  EXPECT_EQ(plain.series.size(), 2u);
  EXPECT_EQ(plain.series[1].values, (std::vector<float>{2.0f, 4.0f}));
}

TEST(TemporalCsv, BadFilesNameTheFileLineAndColumn) {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  const auto read = [&](const std::string& text, ReadOptions o = {}) {
    write_text(path, text);
    return [=] { read_csv_series(path, o); };
  };
  expect_error(read("t,a,b\n1,2,3\n4,5\n"), {path + ":3", "2 cells", "header has 3", "ragged"});
  expect_error(read("a,b\n1,2\n3,x7\n"),
               {path + ":3", "column 2 (\"b\")", "\"x7\" is not a number"});
  expect_error(read("a,b\n1,2\n3,nan\n"), {path + ":3", "column 2", "NaN"});
  expect_error(read("a,b\n1,-inf\n"), {path + ":2", "column 2", "infinite"});
  expect_error(read("a,b\n1,1e39\n"), {path + ":2", "float32"});
  expect_error(read("a,b\n1,1e400\n"), {path + ":2", "column 2"});
  expect_error(read(""), {path, "empty CSV"});
  expect_error(read("a,b\n"), {path, "no data rows"});
  expect_error(read("1,2\n3,4\n"), {path + ":1", "header row"});
  expect_error(read("a,b\n1,\n2,\n"), {path, "column 2 (\"b\")", "no value"});
  expect_error(read("a,\"b\n1,2\n"), {path + ":1", "quoted cell"});
  expect_error(read("a\n1\n2\n3\n", {2, 0}),
               {path, "column 1 (\"a\")", "3 values", "maximum length 2"}, true);
  expect_error(read("date\n2024-01-01\n"), {path, "no series column"});
}

// Writes `text` to `path` and returns what reads it back, for expect_error.
std::function<void()> csv_written(const std::string& path, const std::string& text) {
  write_text(path, text);
  return [=] { read_csv_series(path, {}); };
}

TEST(TemporalCsv, ATypoInTheFirstCellIsNamedNotTakenForATimestampColumn) {
  TempDir dir;
  const std::string path = dir.file("typo.csv");
  const auto read = [&](const std::string& text) { return csv_written(path, text); };
  // Before: the price column became the timestamp column, and the volume answered for it.
  expect_error(read("price,volume\n1.5abc,10\n2,11\n3,12\n"),
               {path + ":2", "column 1 (\"price\")", "\"1.5abc\" is not a number"});
  expect_error(read("price\n1.5abc\n2\n"), {path + ":2", "\"1.5abc\" is not a number"});
  // A column of labels is neither numbers nor timestamps: named at its first cell.
  expect_error(read("id,x\na,1\nb,2\n"), {path + ":2", "column 1 (\"id\")", "\"a\""});
  // A first column is a timestamp column by its whole content, whatever its header...
  write_text(path, "when,price\n2024-01-01,1\n2024-01-02T10:00:00Z,2\n,3\nJan 4 2024,4\n");
  const CsvSeries c = read_csv_series(path, {});
  EXPECT_EQ(c.timestamp_column, "when");
  EXPECT_EQ(c.names, (std::vector<std::string>{"price"}));
  EXPECT_EQ(c.series.at(0).values, (std::vector<float>{1, 2, 3, 4}));
  // ...and one cell of it that is not a timestamp is named as the odd one out.
  expect_error(read("when,price\n2024-01-01,1\n2024-0l-02,2\n2024-01-03,3\n"),
               {path + ":3", "column 1 (\"when\")", "\"2024-0l-02\" is not a timestamp"});
}

TEST(TemporalCsv, SemicolonsHexAndTrailingTyposNameTheCellAndWhatWasExpected) {
  TempDir dir;
  const std::string path = dir.file("odd.csv");
  const struct {
    const char* text;
    std::vector<std::string> parts;
  } cases[] = {
      {"time;price\n2024-01-01;1.5\n2024-01-02;1.6\n",
       {":2", "column 1 (\"time;price\")", "\"2024-01-01;1.5\" is not a number",
        "separated by commas"}},
      {"price\n0x1A\n0x2B\n", {":2", "\"0x1A\" is not a number", "hexadecimal"}},
      {"price\n1\n2\n3x\n", {":4", "column 1 (\"price\")", "\"3x\" is not a number"}},
  };
  for (const auto& k : cases) {
    std::vector<std::string> parts;
    for (const auto& p : k.parts) parts.push_back(p[0] == ':' ? path + p : p);
    try {
      csv_written(path, k.text)();
      ADD_FAILURE() << "no error for " << k.text;
    } catch (const Error& e) {
      EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr)
          << "bad data, not usage: " << e.what();
      for (const auto& p : parts) EXPECT_TRUE(testing::contains(e.what(), p)) << e.what() << p;
      EXPECT_FALSE(testing::contains(e.what(), "no series column")) << e.what();
    }
  }
}

TEST(TimestampCell, DatesAndTimesAreTimestampsNumbersWithTyposAreNot) {
  for (const char* yes :
       {"2024-01-31", "31/01/2024", "2024-01-31T12:00:00.5+02:00", "12:30", "31.01.2024",
        "Jan 31 2024 3:00 PM", "2024-01-31 12:00:00 UTC", "Mon, 1 Sept 2025", "20240131T120000Z"}) {
    EXPECT_TRUE(is_timestamp_cell(yes)) << yes;
  }
  for (const char* no : {"", "1.5abc", "0x1A", "3x", "1.5", "2024-01-01;1.5", "abc", "1 2", "1-",
                         "Jan", "12:30 tomorrow", "nan", "1e5"}) {
    EXPECT_FALSE(is_timestamp_cell(no)) << no;
  }
}

// ---- NPY ----

// Writes the arrays of `script` (numpy in scope as np, a dir D) with the venv's python.
void run_numpy(const std::string& dir, const std::string& script) {
  const std::string file = dir + "/make.py";
  write_text(file, "import numpy as np, sys\nD = sys.argv[1]\n" + script);
  const auto r = testing::run_command(testing::lmtrain_python() + " " + file + " " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(TemporalNpy, ReadsFloat32AndFloat64In2DAnd3D) {
  TempDir dir;
  run_numpy(dir.path(),
            "a = (np.arange(12).reshape(3, 4) * 0.5 - 2).astype(np.float32)\n"
            "np.save(D + '/f4_2d.npy', a)\n"
            "np.save(D + '/f8_2d.npy', a.astype(np.float64) + 1e-9)\n"
            "b = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5) / 3\n"
            "np.save(D + '/f8_3d.npy', b)\n"
            "np.save(D + '/f4_3d.npy', b.astype(np.float32))\n"
            "np.save(D + '/f4_1d.npy', np.array([1.5, -2.5], dtype=np.float32))\n"
            "with open(D + '/v2.npy', 'wb') as f:\n"
            "    np.lib.format.write_array(f, a, version=(2, 0))\n"
            "np.save(D + '/nan.npy', np.array([[1, 2], [3, np.nan]], dtype=np.float32))\n"
            "np.save(D + '/inf.npy', np.array([[1, np.inf]], dtype=np.float64))\n"
            "np.save(D + '/big.npy', np.array([[1e300]], dtype=np.float64))\n"
            "np.save(D + '/i4.npy', np.zeros((2, 3), dtype=np.int32))\n"
            "np.save(D + '/be.npy', np.zeros((2, 3), dtype='>f4'))\n"
            "np.save(D + '/fortran.npy', np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))\n"
            "np.save(D + '/4d.npy', np.zeros((1, 1, 2, 3), dtype=np.float32))\n"
            "np.save(D + '/empty.npy', np.zeros((0, 3), dtype=np.float32))\n"
            "np.save(D + '/zero_len.npy', np.zeros((2, 0), dtype=np.float32))\n"
            "np.save(D + '/rec.npy', np.zeros(2, dtype=[('x', '<f4')]))\n"
            "raw = open(D + '/f4_2d.npy', 'rb').read()\n"
            "open(D + '/truncated.npy', 'wb').write(raw[:-3])\n"
            "open(D + '/overlong.npy', 'wb').write(raw + b'\\0\\0\\0\\0')\n"
            "open(D + '/short_header.npy', 'wb').write(raw[:40])\n");
  const auto f4 = read_npy_series(dir.file("f4_2d.npy"), {});
  ASSERT_EQ(f4.size(), 3u);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(f4[s].channels, 1);
    EXPECT_EQ(f4[s].length, 4);
    for (int64_t t = 0; t < 4; ++t)
      EXPECT_EQ(f4[s].values[t], static_cast<float>((s * 4 + t) * 0.5 - 2));
    EXPECT_EQ(f4[s].valid, (std::vector<uint8_t>(4, 1)));
  }
  const auto f8 = read_npy_series(dir.file("f8_2d.npy"), {});
  EXPECT_EQ(f8[2].values[3], static_cast<float>(3.5 + 1e-9));
  for (const char* name : {"f8_3d.npy", "f4_3d.npy"}) {
    const auto v = read_npy_series(dir.file(name), {});
    ASSERT_EQ(v.size(), 2u) << name;
    EXPECT_EQ(v[1].channels, 3);
    EXPECT_EQ(v[1].length, 5);
    // (n, c, t) -> values[c * L + t] = (n * 15 + c * 5 + t) / 3
    EXPECT_EQ(v[1].values[2 * 5 + 4], static_cast<float>((15 + 10 + 4) / 3.0)) << name;
  }
  EXPECT_EQ(read_npy_series(dir.file("f4_1d.npy"), {}).at(0).values,
            (std::vector<float>{1.5f, -2.5f}));
  EXPECT_EQ(read_npy_series(dir.file("v2.npy"), {})[1].values, f4[1].values);
  EXPECT_EQ(read_series_file(dir.file("f4_3d.npy"), 5).size(), 2u);

  const auto bad = [&](const std::string& name, const std::vector<std::string>& parts,
                       ReadOptions o = {}, bool usage = false) {
    std::vector<std::string> all = {dir.file(name)};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_error([&] { read_npy_series(dir.file(name), o); }, all, usage);
  };
  bad("nan.npy", {"series 1 value 1", "NaN"});
  bad("inf.npy", {"series 0 value 1", "infinite"});
  bad("big.npy", {"series 0 value 0", "float32"});
  bad("i4.npy", {"dtype '<i4'", "float32 and float64"});
  bad("be.npy", {"'>f4'", "big-endian"});
  bad("fortran.npy", {"Fortran order"});
  bad("4d.npy", {"4 dimensions"});
  bad("empty.npy", {"(0, 3)", "no series"});
  bad("zero_len.npy", {"(2, 0)", "empty"});
  bad("rec.npy", {"structured"});
  bad("truncated.npy", {"truncated", "shape (3, 4) of float32", "the file has 45"});
  bad("overlong.npy", {"overlong", "needs 48 data bytes", "the file has 52"});
  bad("short_header.npy", {"truncated .npy file"});
  bad("f4_3d.npy", {"series 0", "5 values", "maximum length 4"}, {4, 0}, true);
  bad("f4_3d.npy", {"series 0", "3 channel(s)", "takes 2"}, {0, 2}, true);  // a key to change
}

TEST(TemporalNpy, HandMadeHeadersAreCheckedByteByByte) {
  TempDir dir;
  const std::string path = dir.file("h.npy");
  const auto header = [](const std::string& dict, int major = 1) {
    std::string h = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
    if (major == 1) {
      h += static_cast<char>(dict.size() & 0xff);
      h += static_cast<char>(dict.size() >> 8);
    } else {
      for (int b = 0; b < 4; ++b) h += static_cast<char>((dict.size() >> (8 * b)) & 0xff);
    }
    return h + dict;
  };
  const auto bad = [&](const std::string& bytes, const std::vector<std::string>& parts) {
    std::vector<std::string> all = {path};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_error([&] { parse_npy_series(bytes, path, {}); }, all);
  };
  float two[2] = {1.0f, 2.0f};
  const std::string data(reinterpret_cast<const char*>(two), sizeof(two));
  // Good: spaces, a trailing comma, Python 2's 'L', double quotes, version 3.
  EXPECT_EQ(parse_npy_series(
                header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }\n") + data,
                path, {})[0]
                .values,
            (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(parse_npy_series(
                header("{\"shape\":(2L,),\"descr\":\"<f4\",\"fortran_order\":False}", 3) + data,
                path, {})[0]
                .values,
            (std::vector<float>{1.0f, 2.0f}));
  bad("PK\x03\x04 zip", {"not a .npy file"});
  bad(header("{}", 4), {"version 4.0"});
  bad(header("{'descr': '<f4', 'shape': (2,)}") + data, {"lacks one of"});
  bad(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}") + data,
      {"unknown header key 'x'"});
  bad(header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}"), {"True or False"});
  bad(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,"), {"valid .npy header"});
  bad(header("{'descr': '<f4, 'fortran_order': False}"), {"valid .npy header"});
  bad(header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}"),
      {"too large"});
  bad(header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
             "4611686018427387904)}") +
          data,
      {"truncated"});
  bad(header("{'descr': '<f2', 'fortran_order': False, 'shape': (1,)}") + "ab", {"'<f2'"});
  std::string lying = header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}");
  lying[8] = static_cast<char>(0xff);  // a header length beyond the file
  bad(lying, {"truncated .npy file", "header says"});
}

// ---- JSONL ----

TEST(TemporalJsonl, ReadsChatTsLinesWithOrWithoutTheExtraFields) {
  TempDir dir;
  const std::string path = dir.file("d.jsonl");
  write_text(
      path,
      "{\"input\": \"Compare <ts><ts/> with <ts><ts/>.\", \"output\": \"The first rises.\", "
      "\"timeseries\": [[1, 2.5, null, 4], [[0, 1], [2, null]]]}\n"
      "\n"
      "{\"input\": \"no series\", \"output\": \"ok\"}\n"
      "{\"input\": \"<ts><ts/>\", \"output\": \" flat\", \"timeseries\": [[3]], \"task\": "
      "\"trend\", "
      "\"choices\": [\"increasing\", \"flat\"], \"answer\": \"flat\", \"numeric_answer\": null, "
      "\"attributes\": {\"b\": 1, \"a\": [2]}}\n");
  const auto v = read_temporal_jsonl(path, {});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].output, "The first rises.");
  ASSERT_EQ(v[0].series.size(), 2u);
  EXPECT_EQ(v[0].series[0].channels, 1);
  EXPECT_EQ(v[0].series[0].values, (std::vector<float>{1, 2.5, 0, 4}));
  EXPECT_EQ(v[0].series[0].valid, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(v[0].series[1].channels, 2);
  EXPECT_EQ(v[0].series[1].length, 2);
  EXPECT_EQ(v[0].series[1].values, (std::vector<float>{0, 1, 2, 0}));
  EXPECT_EQ(v[0].series[1].valid, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_TRUE(v[0].task.empty());
  EXPECT_TRUE(std::isnan(v[0].numeric_answer));
  EXPECT_TRUE(v[1].series.empty());
  EXPECT_EQ(v[2].task, "trend");
  EXPECT_EQ(v[2].choices, (std::vector<std::string>{"increasing", "flat"}));
  EXPECT_EQ(v[2].answer, "flat");
  EXPECT_EQ(nlohmann::json::parse(v[2].attributes_json),
            nlohmann::json::parse("{\"a\": [2], \"b\": 1}"));
  // read_series_file takes every series of every line.
  EXPECT_EQ(read_series_file(path, 0).size(), 3u);
}

TEST(TemporalJsonl, BadLinesNameTheFileLineAndSeries) {
  TempDir dir;
  const std::string path = dir.file("bad.jsonl");
  const auto read = [&](const std::string& line, ReadOptions o = {}) {
    write_text(path, "{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1]]}\n" +
                         line + "\n");
    return [=] { read_temporal_jsonl(path, o); };
  };
  const std::string at = path + ":2";
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": "), {at, "not valid JSON"});
  expect_error(read("[1, 2]"), {at, "JSON object"});
  expect_error(
      read("{\"input\": \"<ts><ts/> <ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1]]}"),
      {at, "2 placeholder(s)", "holds 1 series"});
  expect_error(read("{\"input\": \"x\", \"output\": \"a\", \"timeseries\": [[1]]}"),
               {at, "0 placeholder(s)"});
  expect_error(
      read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1, \"NaN\"]]}"),
      {at, "timeseries[0] value 1", "not a number"});
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1, 1e999]]}"),
               {at, "1e999"});
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1, -1e39]]}"),
               {at, "timeseries[0] value 1", "float32"});
  expect_error(
      read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[[1, 2], [3]]]}"),
      {at, "timeseries[0] channel 1", "ragged"});
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[]]}"),
               {at, "timeseries[0]", "empty"});
  expect_error(
      read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[null, null]]}"),
      {at, "timeseries[0]", "no value"});
  expect_error(
      read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [[1, 2, 3]]}", {2, 0}),
      {at, "timeseries[0]", "3 values", "maximum length 2"}, true);
  expect_error(read("{\"input\": \"<ts><ts/>\", \"timeseries\": [[1]]}"), {at, "no \"output\""});
  expect_error(read("{\"input\": 3, \"output\": \"a\"}"), {at, "\"input\" must be a string"});
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": 5}"),
               {at, "\"timeseries\""});
  expect_error(read("{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [5, [1]]}"),
               {at, "mixes values and lists", "[v0, v1, ...]"});
  expect_error(read("{\"input\": \"a\", \"output\": \"a\", \"output\": \"b\"}"),
               {at, "appears twice"});
  expect_error(read("{\"input\": \"a\", \"output\": \"a\", \"choices\": [1]}"),
               {at, "\"choices\""});
  expect_error(read("{\"input\": \"a\", \"output\": \"a\", \"numeric_answer\": \"3\"}"),
               {at, "numeric_answer"});
  expect_error(read("{\"input\": \"a\", \"output\": \"a\", \"attributes\": []}"),
               {at, "attributes"});
  write_text(path, "\n\n");
  expect_error([&] { read_temporal_jsonl(path, {}); }, {path, "no samples"});
}

TEST(TemporalJsonl, AFlatListOfValuesIsOneSeries) {
  TempDir dir;
  const std::string path = dir.file("flat.jsonl");
  std::string values;
  for (int i = 0; i < 64; ++i) values += (i ? "," : "") + std::to_string(i);
  write_text(path,
             "{\"input\": \"<ts><ts/>\", \"output\": \"a\", \"timeseries\": [" + values +
                 "]}\n{\"input\": \"<ts><ts/>\", \"output\": \"b\", \"timeseries\": [1, null, "
                 "3]}\n");
  const auto samples = read_temporal_jsonl(path, {});
  ASSERT_EQ(samples.size(), 2u);
  ASSERT_EQ(samples[0].series.size(), 1u);
  EXPECT_EQ(samples[0].series[0].length, 64);
  EXPECT_EQ(samples[0].series[0].channels, 1);
  EXPECT_EQ(samples[0].series[0].values[63], 63.0f);
  EXPECT_EQ(samples[1].series.at(0).values, (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(samples[1].series.at(0).valid, (std::vector<uint8_t>{1, 0, 1}));
  // Two placeholders and one flat list: the count says how a flat list is read.
  write_text(path,
             "{\"input\": \"<ts><ts/> <ts><ts/>\", \"output\": \"a\", \"timeseries\": [1, 2]}\n");
  expect_error([&] { read_temporal_jsonl(path, {}); },
               {path + ":1", "holds 1 series", "a flat list of values is one series"});
}

TEST(TemporalJsonl, WrittenSamplesReadBackBitForBit) {
  GeneratorOptions o;
  o.lengths = {32, 64};
  o.channels = 3;
  for (int64_t i = 0; i < 40; ++i) {
    const TemporalSample s = generate_sample(o, i);
    const std::string line = sample_to_jsonl(s);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    const TemporalSample r = sample_from_jsonl(line, "x:1", {});
    EXPECT_EQ(r.input, s.input);
    EXPECT_EQ(r.output, s.output);
    EXPECT_EQ(r.task, s.task);
    EXPECT_EQ(r.choices, s.choices);
    EXPECT_EQ(r.answer, s.answer);
    EXPECT_EQ(std::isnan(r.numeric_answer), std::isnan(s.numeric_answer));
    if (!std::isnan(s.numeric_answer)) {
      EXPECT_EQ(r.numeric_answer, s.numeric_answer);
    }
    EXPECT_EQ(nlohmann::json::parse(r.attributes_json), nlohmann::json::parse(s.attributes_json));
    ASSERT_EQ(r.series.size(), 1u);
    EXPECT_EQ(r.series[0].channels, 3);
    EXPECT_EQ(r.series[0].length, s.series[0].length);
    EXPECT_EQ(std::memcmp(r.series[0].values.data(), s.series[0].values.data(),
                          s.series[0].values.size() * 4),
              0);
    EXPECT_EQ(r.series[0].valid, s.series[0].valid);
  }
  // Any finite float, masked values as null.
  SeriesValues v;
  v.length = 4096;
  uint64_t state = 99;
  for (int64_t t = 0; t < v.length; ++t) {
    float f;
    do {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const auto bits = static_cast<uint32_t>(state >> 32);
      std::memcpy(&f, &bits, 4);
    } while (!std::isfinite(f));
    v.values.push_back(t % 97 == 0 ? 0.0f : f);
    v.valid.push_back(t % 97 == 0 ? 0 : 1);
  }
  v.values.back() = std::numeric_limits<float>::denorm_min();
  TemporalSample s;
  s.input = kSeriesPlaceholder;
  s.output = "\"quoted\"\n\xc3\xa9";
  s.series = {v};
  const TemporalSample r = sample_from_jsonl(sample_to_jsonl(s), "x:1", {});
  EXPECT_EQ(r.output, s.output);
  EXPECT_EQ(std::memcmp(r.series[0].values.data(), v.values.data(), v.values.size() * 4), 0);
  EXPECT_EQ(r.series[0].valid, v.valid);
}

// Found by fuzz_temporal_jsonl: a line with choices and an answer but no task lost them when
// written back; a value -0 read back as +0 (the integer 0).
TEST(TemporalJsonl, ScoringFieldsWithoutATaskAndNegativeZeroSurviveAWriteAndRead) {
  const TemporalSample s = sample_from_jsonl(
      "{\"input\": \"<ts><ts/>\", \"output\": \" a\", \"timeseries\": [[1, -0.0]], "
      "\"choices\": [\"a\", \"b\"], \"answer\": \"a\"}",
      "x:1", {});
  ASSERT_TRUE(std::signbit(s.series[0].values[1]));
  const std::string line = sample_to_jsonl(s);
  const TemporalSample back = sample_from_jsonl(line, "x:1", {});
  EXPECT_EQ(back.choices, s.choices);
  EXPECT_EQ(back.answer, "a");
  EXPECT_TRUE(back.task.empty());
  EXPECT_TRUE(std::signbit(back.series[0].values[1])) << line;
  EXPECT_EQ(sample_to_jsonl(back), line);
}

TEST(TemporalSeriesFile, PicksTheReaderByExtension) {
  TempDir dir;
  write_text(dir.file("a.CSV"), "t,x\n2024-01-01,1\n2024-01-02,2\n");
  EXPECT_EQ(read_series_file(dir.file("a.CSV"), 0).at(0).values, (std::vector<float>{1, 2}));
  expect_error([&] { read_series_file(dir.file("a.CSV"), 1); }, {"a.CSV", "maximum length 1"},
               true);  // a key to change (model.temporal.max_length): usage
  write_text(dir.file("a.txt"), "1 2 3\n");
  expect_error([&] { read_series_file(dir.file("a.txt"), 0); }, {"a.txt", ".csv, .npy or .jsonl"},
               true);
  expect_error([&] { read_series_file(dir.file("missing.npy"), 0); },
               {"missing.npy", "no such file"}, true);
  // A directory is named as one, whatever its name ends with.
  std::filesystem::create_directories(dir.file("series.csv"));
  for (const std::string& d : {dir.path(), dir.file("series.csv")}) {
    try {
      read_series_file(d, 0);
      ADD_FAILURE() << "no error for " << d;
    } catch (const UsageError& e) {
      EXPECT_TRUE(testing::contains(e.what(), d + " is a directory")) << e.what();
      EXPECT_FALSE(testing::contains(e.what(), "no such file")) << e.what();
    }
  }
  write_text(dir.file("s.jsonl"), "{\"timeseries\": [[1, 2], [3]]}\n");
  EXPECT_EQ(read_series_file(dir.file("s.jsonl"), 0).size(), 2u);
  write_text(dir.file("s.jsonl"), "{\"input\": \"text only\"}\n");
  expect_error([&] { read_series_file(dir.file("s.jsonl"), 0); },
               {"s.jsonl", "no series in any line"});
}

}  // namespace
}  // namespace lmtrain::data::temporal
