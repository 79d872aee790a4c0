#include "data/temporal/series_file.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.h"
#include "data/temporal/csv_series.h"
#include "data/temporal/npy_series.h"
#include "data/temporal/temporal_jsonl.h"

namespace lmtrain::data::temporal {

std::vector<SeriesValues> read_series_file(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  // Before the extension: a directory named "x.csv" is no more a file than one named "x".
  if (std::filesystem::is_directory(path, ec)) {
    throw UsageError(path + " is a directory: name one series file in it (.csv, .npy or .jsonl)");
  }
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext != ".csv" && ext != ".npy" && ext != ".jsonl") {
    throw UsageError(path + ": a series file must be .csv, .npy or .jsonl (by its extension)");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(path + ": no such file (a series file: .csv, .npy or .jsonl)");
  }
  if (ext == ".csv") return read_csv_series(path, options).series;
  if (ext == ".npy") return read_npy_series(path, options);
  std::vector<SeriesValues> out;
  for (auto& s : read_temporal_jsonl(path, options, JsonlFields::kSeriesOnly)) {
    for (auto& v : s.series) out.push_back(std::move(v));
  }
  if (out.empty()) throw Error(path + ": no series in any line (\"timeseries\": [[...], ...])");
  return out;
}

}  // namespace lmtrain::data::temporal
