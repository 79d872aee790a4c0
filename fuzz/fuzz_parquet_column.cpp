// Our wrapper around Arrow's parquet reader (data/corpus/parquet_file.cpp): opening a file,
// finding and checking the text column, reading it row group by row group. The bytes are
// Arrow's to parse (its own fuzzing covers that); what is ours must only ever fail with
// lmtrain::Error naming the file. The same bytes are read as a conversations file too: the
// nested `messages` column turned into JSON (list<struct<role, content>>, any other nesting).
// Seeds: fuzz/make_corpus_seeds.py.
#include <string>

#include "data/corpus/parquet_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    size_t total = 0;
    lmtrain::data::read_parquet_buffer(
        std::string(reinterpret_cast<const char*>(data), size), "text",
        [&](int, int64_t, std::string_view v) { total += v.size(); });
    (void)total;
  });
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    size_t total = 0;
    lmtrain::data::read_parquet_json_buffer(
        std::string(reinterpret_cast<const char*>(data), size), "messages",
        [&](int64_t, const std::string& json) { total += json.size(); });
    (void)total;
  });
  return 0;
}
