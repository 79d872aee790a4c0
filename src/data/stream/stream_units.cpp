#include "data/stream/stream_units.h"

#include <algorithm>

#include "core/error.h"
#include "core/seed_mix.h"
#include "data/corpus/file_blocks.h"
#include "data/corpus/parquet_file.h"
#include "data/document_hash.h"
#include "data/window_stream.h"

namespace lmtrain::data {
namespace {

uint64_t unit_hash(const StreamUnit& u, const std::vector<InputFile>& files, uint64_t seed) {
  std::string name = files.at(u.file).path + "#" + std::to_string(u.row_group);
  if (u.end != 0) name += "@" + std::to_string(u.begin);         // a block
  return core::mix_seed(document_hash(name), seed, 0x554E4954);  // "UNIT"
}

}  // namespace

std::vector<StreamUnit> list_stream_units(const std::vector<InputFile>& files,
                                          const DocumentReaderOptions& options,
                                          uint64_t block_bytes) {
  std::vector<StreamUnit> units;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto file = static_cast<uint32_t>(i);
    if (files[i].format == InputFormat::kParquet) {
      ParquetFile pf(files[i].path, options.text_column, options.text_column_setting);
      for (int g = 0; g < pf.num_row_groups(); ++g) {
        StreamUnit u;
        u.file = file;
        u.row_group = g;
        u.bytes = pf.row_group_compressed_bytes(g);
        units.push_back(u);
      }
    } else if (block_bytes > 0 && files[i].size > block_bytes &&
               splits_into_blocks(files[i], options)) {
      for (uint64_t b = 0; b < files[i].size; b += block_bytes) {
        StreamUnit u;
        u.file = file;
        u.begin = b;
        u.end = std::min(b + block_bytes, files[i].size);
        u.bytes = u.end - u.begin;
        units.push_back(u);
      }
    } else {
      StreamUnit u;
      u.file = file;
      u.bytes = files[i].size;
      units.push_back(u);
    }
  }
  return units;
}

StreamSplit split_stream_units(const std::vector<StreamUnit>& units,
                               const std::vector<InputFile>& files, double val_fraction,
                               uint64_t seed) {
  StreamSplit s;
  std::vector<std::pair<uint64_t, size_t>> keyed;
  for (size_t i = 0; i < units.size(); ++i) keyed.push_back({unit_hash(units[i], files, seed), i});
  std::vector<bool> val(units.size(), false);
  for (const auto& [h, i] : keyed) {
    val[i] = static_cast<double>(h >> 11) * 0x1.0p-53 < val_fraction;
  }
  // Zero means no validation at all (the run is then not evaluated), not "at least one".
  if (units.size() >= 2 && val_fraction > 0) {
    const auto lowest = *std::min_element(keyed.begin(), keyed.end());
    const auto highest = *std::max_element(keyed.begin(), keyed.end());
    if (std::none_of(val.begin(), val.end(), [](bool v) { return v; })) val[lowest.second] = true;
    if (std::all_of(val.begin(), val.end(), [](bool v) { return v; })) val[highest.second] = false;
  }
  for (size_t i = 0; i < units.size(); ++i) (val[i] ? s.val : s.train).push_back(units[i]);
  return s;
}

std::vector<size_t> rank_units(size_t num_units, uint64_t seed, int64_t epoch, int rank, int world,
                               bool shuffle) {
  std::vector<int64_t> order;
  if (shuffle) {
    order = seeded_permutation(static_cast<int64_t>(num_units), seed, static_cast<uint64_t>(epoch));
  } else {
    for (size_t i = 0; i < num_units; ++i) order.push_back(static_cast<int64_t>(i));
  }
  std::vector<size_t> mine;
  for (size_t k = static_cast<size_t>(rank); k < order.size(); k += static_cast<size_t>(world)) {
    mine.push_back(static_cast<size_t>(order[k]));
  }
  return mine;
}

void read_unit_documents(const StreamUnit& unit, const std::vector<InputFile>& files,
                         const DocumentReaderOptions& options,
                         const std::function<bool(std::string&)>& fn) {
  const InputFile& f = files.at(unit.file);
  std::string text;
  if (unit.row_group >= 0) {
    ParquetFile pf(f.path, options.text_column, options.text_column_setting);
    pf.load_row_group(unit.row_group);
    for (int64_t r = 0; r < pf.loaded_rows(); ++r) {
      const auto v = pf.value(r);
      if (!v || is_blank(*v)) continue;
      text.assign(v->data(), v->size());
      if (!fn(text)) return;
    }
    return;
  }
  auto reader = unit.end != 0 ? open_block_reader(f, unit.begin, unit.end, options)
                              : open_document_reader(f, options);
  while (reader->next(&text)) {
    if (!fn(text)) return;
  }
}

}  // namespace lmtrain::data
