// Series from a NumPy .npy file (issue 26): float32 or float64, little-endian, C order, of
// shape (N, L) (N univariate series), (N, C, L) (N series of C channels) or (L,) (one series).
// The header is parsed here, byte by byte (format versions 1.0, 2.0 and 3.0); nothing is
// executed or trusted: the data must be exactly N * C * L values. An .npy array has no mask,
// so NaN and inf are errors, as everywhere.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/temporal/series_checks.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

struct NpyHeader {
  std::string descr;  // "<f4" or "<f8"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the values start
};

// The header of an .npy file's bytes; Error (bad data, exit 1) naming `path` for a bad magic, an
// unknown version, a header that runs past the file or is not the dict numpy writes, a dtype other
// than float32/float64 little-endian, Fortran order, or a shape that is not 1-, 2- or 3-D.
NpyHeader parse_npy_header(const std::string& bytes, const std::string& path);

// Every series of the file (see above). Error naming the file and the series, channel and
// position for: truncated or overlong data, NaN, inf, an empty series, a series longer than
// options.max_length.
std::vector<SeriesValues> read_npy_series(const std::string& path, const ReadOptions& options);
std::vector<SeriesValues> parse_npy_series(const std::string& bytes, const std::string& path,
                                           const ReadOptions& options);

}  // namespace lmtrain::data::temporal
