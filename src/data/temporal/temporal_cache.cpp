#include "data/temporal/temporal_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_strict.h"
#include "core/output_dir.h"
#include "core/sha256.h"
#include "data/temporal/series_text.h"
#include "data/temporal/temporal_jsonl.h"

namespace lmtrain::data::temporal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormatName = "lmtrain temporal-data";
constexpr const char* kSeriesLayout =
    "one series per placeholder <ts><ts/>; univariate: [v0, v1, ...]; C channels: "
    "[[channel 0 values], ..., [channel C-1 values]]; null = a missing value";
// Samples per work item of a generation thread; items are written in order.
constexpr int64_t kChunkSamples = 64;

nlohmann::json manifest_json(const TemporalManifest& m) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards) {
    shards.push_back({{"file", s.file},
                      {"first_index", s.first_index},
                      {"num_samples", s.num_samples},
                      {"bytes", s.bytes},
                      {"sha256", s.sha256}});
  }
  return {{"format", kFormatName},
          {"format_version", kTemporalFormatVersion},
          {"generator_version", m.generator_version},
          {"seed", m.generator.seed},
          {"num_samples", m.num_samples},
          {"lengths", m.generator.lengths},
          {"channels", m.generator.channels},
          {"tasks", m.generator.tasks},
          {"shard_size", m.shard_size},
          {"timeseries_layout", kSeriesLayout},
          {"shards", shards}};
}

// A manifest key of the expected kind, or Error naming the file and the key.
const nlohmann::json& manifest_key(const nlohmann::json& j, const char* key,
                                   const std::string& file, nlohmann::json::value_t kind) {
  const auto it = j.find(key);
  const bool ok = it != j.end() &&
                  (it->type() == kind || (kind == nlohmann::json::value_t::number_integer &&
                                          it->type() == nlohmann::json::value_t::number_unsigned));
  if (!ok) {
    throw Error(file + ": key \"" + key + "\" is missing or of the wrong type (" +
                std::string(kFormatName) + " manifest)");
  }
  return *it;
}

std::string temporal_errno_text() { return std::strerror(errno); }

// Generates samples [begin, end) on `threads` threads, in chunks, and returns their lines in
// order. Each sample depends only on (options, index), so the text is the same for any split.
std::vector<std::string> generate_lines(const GeneratorOptions& g, int64_t begin, int64_t end,
                                        int threads) {
  const int64_t n_chunks = (end - begin + kChunkSamples - 1) / kChunkSamples;
  std::vector<std::string> chunks(static_cast<size_t>(n_chunks));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  const auto work = [&] {
    try {
      for (int64_t c = next++; c < n_chunks && !failed; c = next++) {
        std::string& out = chunks[static_cast<size_t>(c)];
        const int64_t lo = begin + c * kChunkSamples;
        const int64_t hi = std::min(end, lo + kChunkSamples);
        for (int64_t i = lo; i < hi; ++i) out += sample_to_jsonl(generate_sample(g, i)) + "\n";
      }
    } catch (...) {
      if (!failed.exchange(true)) failure = std::current_exception();
    }
  };
  const int n = static_cast<int>(std::min<int64_t>(threads, n_chunks));
  if (n <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  return chunks;
}

}  // namespace

std::string temporal_shard_name(int64_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "train_%05lld.jsonl", static_cast<long long>(shard));
  return buf;
}

TemporalDataSummary write_temporal_data(const TemporalDataOptions& o,
                                        const ProgressCallback& progress) {
  check_generator_options(o.generator);
  if (o.num_samples < 1) {
    throw UsageError("temporal-data: --num_samples must be at least 1, got " +
                     std::to_string(o.num_samples));
  }
  if (o.shard_size < 1) {
    throw UsageError("temporal-data: --shard_size must be at least 1, got " +
                     std::to_string(o.shard_size));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  core::OutputDir out(o.output_dir, {"temporal-data", {}, o.overwrite});
  TemporalDataSummary summary;
  summary.threads = o.threads > 0
                        ? o.threads
                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  TemporalManifest& m = summary.manifest;
  m.generator = o.generator;
  if (m.generator.tasks.empty()) m.generator.tasks = temporal_tasks();
  m.num_samples = o.num_samples;
  m.shard_size = o.shard_size;

  // Rounds of a few chunks per thread: memory stays bounded, progress comes often.
  const int64_t round = static_cast<int64_t>(summary.threads) * kChunkSamples * 8;
  int64_t done = 0;
  for (int64_t first = 0, k = 0; first < o.num_samples; first += o.shard_size, ++k) {
    const int64_t last = std::min(o.num_samples, first + o.shard_size);
    TemporalShardInfo shard{temporal_shard_name(k), first, last - first, 0, ""};
    core::AtomicFileWriter writer(out.staging() + "/" + shard.file);
    core::Sha256 sha;
    for (int64_t a = first; a < last; a += round) {
      const int64_t b = std::min(last, a + round);
      for (const std::string& text : generate_lines(m.generator, a, b, summary.threads)) {
        writer.write(text);
        sha.update(text);
        shard.bytes += static_cast<int64_t>(text.size());
      }
      done += b - a;
      if (progress) progress({done, o.num_samples, elapsed()});
    }
    writer.commit();
    shard.sha256 = sha.hex_digest();
    summary.bytes += shard.bytes;
    m.shards.push_back(std::move(shard));
  }
  if (o.lm_text) {
    core::AtomicFileWriter writer(out.staging() + "/" + kLmTextFile);
    for (int64_t i = 0; i < o.num_samples; ++i) {
      const GeneratedCurve c = generate_curve(m.generator, i);  // tasks resolved above
      const std::string text =
          warmup_text(c.sample, attribute_words(c.attributes, m.generator.tasks));
      writer.write(nlohmann::json{{"text", text}}.dump() + "\n");
    }
    writer.commit();
  }
  core::write_file_atomic(out.staging() + "/" + kTemporalManifest, manifest_json(m).dump(2) + "\n");
  summary.previous = out.commit();
  summary.seconds = elapsed();
  return summary;
}

TemporalManifest read_temporal_manifest(const std::string& dir) {
  using vt = nlohmann::json::value_t;
  const std::string file = dir + "/" + kTemporalManifest;
  const nlohmann::json j = core::parse_json_strict(core::read_file(file), file);
  if (!j.is_object()) throw Error(file + ": not a JSON object (" + kFormatName + " manifest)");
  if (manifest_key(j, "format", file, vt::string).get<std::string>() != kFormatName) {
    throw Error(file + ": \"format\" is not \"" + kFormatName + "\"");
  }
  const auto version = manifest_key(j, "format_version", file, vt::number_integer).get<int64_t>();
  if (version != kTemporalFormatVersion) {
    throw Error(file + ": format_version " + std::to_string(version) + " is not " +
                std::to_string(kTemporalFormatVersion) + " (made by another lmtrain version)");
  }
  TemporalManifest m;
  m.generator_version =
      manifest_key(j, "generator_version", file, vt::number_integer).get<int64_t>();
  m.generator.seed = manifest_key(j, "seed", file, vt::number_integer).get<uint64_t>();
  m.num_samples = manifest_key(j, "num_samples", file, vt::number_integer).get<int64_t>();
  m.shard_size = manifest_key(j, "shard_size", file, vt::number_integer).get<int64_t>();
  m.generator.channels = manifest_key(j, "channels", file, vt::number_integer).get<int64_t>();
  m.generator.lengths.clear();
  for (const auto& l : manifest_key(j, "lengths", file, vt::array)) {
    if (!l.is_number_integer()) throw Error(file + ": \"lengths\" must be integers");
    m.generator.lengths.push_back(l.get<int64_t>());
  }
  for (const auto& t : manifest_key(j, "tasks", file, vt::array)) {
    if (!t.is_string()) throw Error(file + ": \"tasks\" must be strings");
    m.generator.tasks.push_back(t.get<std::string>());
  }
  int64_t expected_first = 0;
  for (const auto& s : manifest_key(j, "shards", file, vt::array)) {
    if (!s.is_object()) throw Error(file + ": \"shards\" must hold objects");
    TemporalShardInfo info;
    info.file = manifest_key(s, "file", file, vt::string).get<std::string>();
    info.first_index = manifest_key(s, "first_index", file, vt::number_integer).get<int64_t>();
    info.num_samples = manifest_key(s, "num_samples", file, vt::number_integer).get<int64_t>();
    info.bytes = manifest_key(s, "bytes", file, vt::number_integer).get<int64_t>();
    info.sha256 = manifest_key(s, "sha256", file, vt::string).get<std::string>();
    if (info.file.empty() || info.file.find('/') != std::string::npos ||
        info.first_index != expected_first || info.num_samples < 0) {
      throw Error(file + ": shard \"" + info.file + "\" is not the next shard of the cache");
    }
    expected_first += info.num_samples;
    m.shards.push_back(std::move(info));
  }
  if (expected_first != m.num_samples) {
    throw Error(file + ": the shards hold " + std::to_string(expected_first) +
                " samples, num_samples says " + std::to_string(m.num_samples));
  }
  return m;
}

TemporalDataReader::TemporalDataReader(const std::string& path, const ReadOptions& options,
                                       bool verify_checksums)
    : options_(options) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    files_.push_back(path);
  } else if (!fs::is_directory(path, ec)) {
    throw UsageError(path +
                     ": no such file or directory (temporal data: a temporal-data cache, a "
                     "folder of .jsonl files or one .jsonl file)");
  } else if (fs::exists(path + "/" + kTemporalManifest, ec)) {
    manifest_ = read_temporal_manifest(path);
    for (const auto& s : manifest_->shards) files_.push_back(path + "/" + s.file);
  } else {
    for (const auto& e : fs::directory_iterator(path)) {
      if (e.is_regular_file() && e.path().extension() == ".jsonl")
        files_.push_back(e.path().string());
    }
    std::sort(files_.begin(), files_.end());
    if (files_.empty()) {
      throw UsageError(path + ": neither " + kTemporalManifest + " nor any .jsonl file in it");
    }
  }
  std::vector<char> buf(1 << 20);
  for (size_t f = 0; f < files_.size(); ++f) {
    const std::string& file = files_[f];
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open " + file + ": " + temporal_errno_text());
    fds_.push_back(fd);
    core::Sha256 sha;
    uint64_t offset = 0, line_start = 0;
    uint32_t line_no = 1;
    bool blank = true;
    const size_t first_line = lines_.size();
    const auto end_line = [&](uint64_t end) {
      if (!blank)
        lines_.push_back({static_cast<uint32_t>(f), line_no, line_start, end - line_start});
      ++line_no;
      line_start = end + 1;
      blank = true;
    };
    while (true) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0) throw Error("cannot read " + file + ": " + temporal_errno_text());
      if (n == 0) break;
      if (verify_checksums) sha.update(buf.data(), static_cast<size_t>(n));
      for (ssize_t i = 0; i < n; ++i) {
        const char c = buf[static_cast<size_t>(i)];
        if (c == '\n') {
          end_line(offset + static_cast<uint64_t>(i));
        } else if (c != ' ' && c != '\t' && c != '\r') {
          blank = false;
        }
      }
      offset += static_cast<uint64_t>(n);
    }
    end_line(offset);
    if (manifest_) {
      const TemporalShardInfo& s = manifest_->shards[f];
      const auto held = static_cast<int64_t>(lines_.size() - first_line);
      if (held != s.num_samples) {
        throw Error(file + ": holds " + std::to_string(held) + " samples, " + kTemporalManifest +
                    " says " + std::to_string(s.num_samples) +
                    " (an incomplete or edited cache: generate it again)");
      }
      if (verify_checksums &&
          (static_cast<int64_t>(offset) != s.bytes || sha.hex_digest() != s.sha256)) {
        throw Error(file + ": its size or sha256 differs from " + kTemporalManifest +
                    " (an edited or damaged cache: generate it again)");
      }
    }
  }
  if (lines_.empty()) throw Error(path + ": no samples");
}

TemporalDataReader::~TemporalDataReader() {
  for (int fd : fds_) ::close(fd);
}

TemporalSample TemporalDataReader::sample(int64_t i) const {
  if (i < 0 || i >= size()) {
    throw Error("temporal data: sample " + std::to_string(i) + " of " + std::to_string(size()));
  }
  const Line& l = lines_[static_cast<size_t>(i)];
  std::string text(l.length, '\0');
  for (uint64_t got = 0; got < l.length;) {
    const ssize_t n = ::pread(fds_[l.file], text.data() + got, l.length - got,
                              static_cast<off_t>(l.offset + got));
    if (n <= 0) {
      throw Error("cannot read " + files_[l.file] + ": " +
                  (n == 0 ? std::string("the file became shorter") : temporal_errno_text()));
    }
    got += static_cast<uint64_t>(n);
  }
  return sample_from_jsonl(text, files_[l.file] + ":" + std::to_string(l.line_no), options_);
}

std::vector<TemporalSample> read_temporal_dir(const std::string& path, const ReadOptions& options) {
  const TemporalDataReader reader(path, options, /*verify_checksums=*/true);
  std::vector<TemporalSample> out;
  out.reserve(static_cast<size_t>(reader.size()));
  for (int64_t i = 0; i < reader.size(); ++i) out.push_back(reader.sample(i));
  return out;
}

}  // namespace lmtrain::data::temporal
