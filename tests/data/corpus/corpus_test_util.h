// Test helpers for the corpus readers: compressed copies of text (zlib, libzstd) and parquet
// files written by pyarrow (tests/fixtures/write_parquet.py, the venv's python).
#pragma once
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmtrain::testing {

inline std::string gzip_bytes(const std::string& data, int level = 6) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string zstd_bytes(const std::string& data, int level = 3) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(&out[0], out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress");
  out.resize(n);
  return out;
}

// False in a build configured with -DLMTRAIN_PARQUET=OFF (no pyarrow: the GPU machine's python),
// whose parquet tests skip saying so.
inline bool parquet_built() {
#if LMTRAIN_PARQUET
  return true;
#else
  return false;
#endif
}
#define LMTRAIN_SKIP_WITHOUT_PARQUET()      \
  if (!::lmtrain::testing::parquet_built()) \
  GTEST_SKIP() << "built with LMTRAIN_PARQUET=OFF (no pyarrow at configure time)"

// Writes docs (nullopt = a null) as a parquet file; returns its row group count.
inline int write_parquet(const std::string& path,
                         const std::vector<std::optional<std::string>>& docs, int row_group_size,
                         const std::string& column = "text", const std::string& type = "string",
                         bool other_column = false) {
  nlohmann::json spec;
  spec["docs"] = nlohmann::json::array();
  for (const auto& d : docs) {
    if (d) {
      spec["docs"].push_back(*d);
    } else {
      spec["docs"].push_back(nullptr);
    }
  }
  spec["row_group_size"] = row_group_size;
  spec["column"] = column;
  spec["type"] = type;
  spec["other_column"] = other_column;
  const std::string spec_path = path + ".spec.json";
  write_text(spec_path, spec.dump());
  const auto r = run_command(lmtrain_python() + " " + source_dir() +
                             "/tests/fixtures/write_parquet.py " + spec_path + " " + path);
  std::remove(spec_path.c_str());  // not a document of the corpus beside it
  if (r.exit_code != 0) throw std::runtime_error("write_parquet.py failed:\n" + r.output);
  return std::stoi(r.output);
}

}  // namespace lmtrain::testing
