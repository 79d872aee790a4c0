// Writes TensorBoard scalar summaries ("events.out.tfevents.<unix_time>.<hostname>") without
// depending on TensorFlow or protobuf: the few Event fields we need are hand-encoded.
//
// File format: a sequence of TFRecords
//   [u64 LE length][u32 masked crc32c(length bytes)][data][u32 masked crc32c(data)]
// where the first record is Event{wall_time, file_version: "brain.Event:2"} and every later
// one is Event{wall_time, step, summary{value{tag, simple_value}...}}.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace lmtrain::train {

class TfEventsWriter {
 public:
  // Creates log_dir if needed and opens a new event file in it. Throws lmtrain::Error if the
  // file cannot be created.
  explicit TfEventsWriter(const std::string& log_dir);
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // One scalar; flushed to the OS immediately so a crashed or live run is visible in TensorBoard.
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several scalars of one step in a single event (one write).
  void add_scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step);
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// Protobuf encoding of one tensorboard Event (exposed for tests and tools).
std::string encode_file_version_event(double wall_time);
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& values);
// TFRecord framing of one record's payload.
std::string frame_tfrecord(const std::string& data);

}  // namespace lmtrain::train
