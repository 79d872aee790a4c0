// The units a streaming loader deals out to ranks (issue 28's `data.source: stream`): each
// parquet row group is one, each block of a large uncompressed JSONL or separated text file one,
// each other file (compressed, or small) one. Units are
// split into train and validation by a hash of their name, and each epoch deals the training
// units to ranks in an order fixed by (seed, epoch): rank r reads units r, r + W, r + 2W, ...
// of that order, so over an epoch every unit, and every document, is read exactly once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"

namespace lmtrain::data {

struct StreamUnit {
  uint32_t file = 0;       // index into the file list
  int32_t row_group = -1;  // parquet row group; -1: the whole file, or a block of it
  // A block of a large uncompressed file (data/corpus/file_blocks.h): the documents starting in
  // bytes [begin, end). end == 0: the whole file.
  uint64_t begin = 0, end = 0;
  uint64_t bytes = 0;  // on disk (a row group's compressed bytes): for progress
};

// Every unit of `files`, in file order: a parquet file's row groups, an uncompressed JSONL or
// separated text file larger than block_bytes in blocks of block_bytes (0: never split), any
// other file whole.
std::vector<StreamUnit> list_stream_units(const std::vector<InputFile>& files,
                                          const DocumentReaderOptions& options,
                                          uint64_t block_bytes);

struct StreamSplit {
  std::vector<StreamUnit> train, val;
};

// A unit is validation when the hash of "path#row_group" mixed with the seed falls in the
// lowest val_fraction; with two units or more and val_fraction > 0, each side gets at least one
// (the unit of smallest / largest hash is moved over). val_fraction = 0 holds out none.
// Independent of the order the files were given in.
StreamSplit split_stream_units(const std::vector<StreamUnit>& units,
                               const std::vector<InputFile>& files, double val_fraction,
                               uint64_t seed);

// Which of `units` rank `rank` of `world` reads in epoch `epoch`, in reading order (indices into
// `units`). shuffle = false: the listed order (validation).
std::vector<size_t> rank_units(size_t num_units, uint64_t seed, int64_t epoch, int rank, int world,
                               bool shuffle);

// Calls fn(text) for every document of one unit, in order (blank documents skipped, as every
// reader does). Stops early when fn returns false.
void read_unit_documents(const StreamUnit& unit, const std::vector<InputFile>& files,
                         const DocumentReaderOptions& options,
                         const std::function<bool(std::string&)>& fn);

}  // namespace lmtrain::data
