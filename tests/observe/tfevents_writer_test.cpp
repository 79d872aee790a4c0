#include "observe/tfevents_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "core/error.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;
};

// A minimal protobuf reader, written from the wire-format spec independently of the encoder.
class Reader {
 public:
  explicit Reader(const std::string& buf) : buf_(buf) {}
  bool done() const { return pos_ >= buf_.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= buf_.size()) throw std::runtime_error("truncated varint");
      uint8_t b = uint8_t(buf_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::string bytes(size_t n) {
    if (pos_ + n > buf_.size()) throw std::runtime_error("truncated field");
    std::string s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  const std::string& buf_;
  size_t pos_ = 0;
};

DecodedEvent decode_event(const std::string& data) {
  DecodedEvent ev;
  Reader r(data);
  while (!r.done()) {
    uint64_t key = r.varint();
    int field = int(key >> 3), wire = int(key & 7);
    if (field == 1 && wire == 1) {
      std::string b = r.bytes(8);
      std::memcpy(&ev.wall_time, b.data(), 8);
    } else if (field == 2 && wire == 0) {
      ev.step = static_cast<int64_t>(r.varint());
    } else if (field == 3 && wire == 2) {
      ev.file_version = r.bytes(r.varint());
    } else if (field == 5 && wire == 2) {
      std::string summary = r.bytes(r.varint());
      Reader s(summary);
      while (!s.done()) {
        EXPECT_EQ(s.varint(), (1u << 3) | 2u);  // Summary.value
        std::string value = s.bytes(s.varint());
        Reader v(value);
        std::string tag;
        float simple = 0;
        while (!v.done()) {
          uint64_t vkey = v.varint();
          if (vkey == ((1u << 3) | 2u)) {
            tag = v.bytes(v.varint());
          } else if (vkey == ((2u << 3) | 5u)) {
            std::string b = v.bytes(4);
            std::memcpy(&simple, b.data(), 4);
          } else {
            ADD_FAILURE() << "unexpected Summary.Value key " << vkey;
            return ev;
          }
        }
        ev.scalars.emplace_back(tag, simple);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << field << " wire type " << wire;
      return ev;
    }
  }
  return ev;
}

uint64_t le(const std::string& s, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[pos + i]);
  return v;
}

// Parses a whole event file, checking both CRCs of every record.
std::vector<DecodedEvent> read_events(const std::string& path) {
  const std::string raw = testing::read_text(path);
  std::vector<DecodedEvent> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    EXPECT_LE(pos + 16, raw.size()) << "truncated record";
    if (pos + 16 > raw.size()) break;
    const uint64_t len = le(raw, pos, 8);
    EXPECT_EQ(le(raw, pos + 8, 4), core::masked_crc32c(raw.data() + pos, 8)) << "length crc";
    const std::string data = raw.substr(pos + 12, len);
    EXPECT_EQ(le(raw, pos + 12 + len, 4), core::masked_crc32c(data.data(), data.size()))
        << "data crc";
    out.push_back(decode_event(data));
    pos += 16 + len;
  }
  return out;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TfEventsTest, FileNameAndVersionRecord) {
  testing::TempDir dir;
  const double before = double(std::time(nullptr));
  TfEventsWriter w(dir.file("logs"));  // creates the directory
  const std::string name = std::filesystem::path(w.path()).filename().string();
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(std::string(".") + host), std::string::npos) << name;

  auto events = read_events(w.path());  // readable before any scalar: version is flushed
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GE(events[0].wall_time, before);
  EXPECT_LT(events[0].wall_time, before + 60);
}

TEST(TfEventsTest, ScalarsRoundTrip) {
  testing::TempDir dir;
  TfEventsWriter w(dir.path());
  w.add_scalar("train/loss", 2.5, 0);
  w.add_scalar("train/loss", 1.25, 100);
  w.add_scalar("train/lr", 3e-4, 1LL << 40);
  w.add_scalars({{"val/loss", 1.0}, {"val/ppl", 2.718281828}}, 150);
  w.add_scalar("odd", -7.0, -3);  // negative step: 10-byte varint
  // Visible without flush() or close: a live run shows up in TensorBoard.
  auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[1].step, 0);
  ASSERT_EQ(events[1].scalars.size(), 1u);
  EXPECT_EQ(events[1].scalars[0], (std::pair<std::string, float>("train/loss", 2.5f)));
  EXPECT_EQ(events[2].step, 100);
  EXPECT_EQ(events[2].scalars[0].second, 1.25f);
  EXPECT_EQ(events[3].step, 1LL << 40);
  EXPECT_EQ(events[3].scalars[0], (std::pair<std::string, float>("train/lr", float(3e-4))));
  EXPECT_EQ(events[4].step, 150);
  ASSERT_EQ(events[4].scalars.size(), 2u);
  EXPECT_EQ(events[4].scalars[1], (std::pair<std::string, float>("val/ppl", 2.718281828f)));
  EXPECT_EQ(events[5].step, -3);
  EXPECT_EQ(events[5].scalars[0].second, -7.0f);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GE(events[i].wall_time, events[0].wall_time);
}

TEST(TfEventsTest, TwoWritersDoNotShareAFile) {
  testing::TempDir dir;
  TfEventsWriter a(dir.path());
  TfEventsWriter b(dir.path());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(event_files(dir.path()).size(), 2u);
}

TEST(TfEventsTest, UnwritableDirThrows) {
  testing::TempDir dir;
  testing::write_text(dir.file("file"), "x");
  EXPECT_THROW(TfEventsWriter(dir.file("file")), Error);
}

TEST(TfEventsTest, PythonReaderAgrees) {
  const std::string python = testing::lmtrain_python();
  testing::TempDir dir;
  std::string path;
  {
    TfEventsWriter w(dir.path());
    w.add_scalar("loss", 0.5, 10);
    w.add_scalars({{"a", 1.5}, {"b", -2.0}}, 20);
    path = w.path();
  }
  auto r = testing::run_command(python + " " + testing::source_dir() +
                                "/scripts/read_tfevents.py " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t nl; (nl = r.output.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(nlohmann::json::parse(r.output.substr(start, nl - start)));
  }
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[0]["file_version"], "brain.Event:2");
  EXPECT_EQ(lines[1]["step"], 10);
  EXPECT_EQ(lines[1]["scalars"], nlohmann::json::parse(R"([["loss", 0.5]])"));
  EXPECT_EQ(lines[2]["step"], 20);
  EXPECT_EQ(lines[2]["scalars"], nlohmann::json::parse(R"([["a", 1.5], ["b", -2.0]])"));
}

// TensorBoard's own loader (the venv's pip `tensorboard`) sees every scalar we wrote, with its
// step and value (as the float32 the event stores). A training run's events file is checked
// against metrics.jsonl in tests/e2e/python_interop_test.cpp.
TEST(TfEventsTest, TensorBoardLoads) {
  testing::TempDir dir;
  std::map<std::string, std::vector<std::pair<int64_t, float>>> want;
  {
    TfEventsWriter w(dir.path());
    for (int64_t step = 1; step <= 40; ++step) {
      const double loss = 5.0 / static_cast<double>(step) + 1e-7 * static_cast<double>(step);
      w.add_scalar("loss", loss, step);
      want["loss"].emplace_back(step, static_cast<float>(loss));
      if (step % 10 == 0) {
        w.add_scalars({{"val/loss", -0.1 * static_cast<double>(step)}, {"lr", 3e-4 / step}}, step);
        want["val/loss"].emplace_back(step, static_cast<float>(-0.1 * static_cast<double>(step)));
        want["lr"].emplace_back(step, static_cast<float>(3e-4 / step));
      }
    }
  }
  auto r = testing::run_hf_check("tensorboard " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = testing::check_result(r);
  ASSERT_EQ(got.size(), want.size()) << got.dump();
  for (const auto& [tag, points] : want) {
    SCOPED_TRACE(tag);
    ASSERT_EQ(got[tag].size(), points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(got[tag][i][0].get<int64_t>(), points[i].first);
      EXPECT_EQ(got[tag][i][1].get<float>(), points[i].second);
    }
  }
}

}  // namespace
}  // namespace lmtrain::train
