// Stage 1 of `lmtrain prepare`: every input's sha256 (for prepare.json, and to notice an input
// edited under a resumed run), and which text files are binary (skipped).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "data/prepare_stages.h"

namespace lmtrain::data::prepare_detail {

constexpr size_t kMaxNamedSkips = 5;

nlohmann::json hash_inputs(const std::vector<InputFile>& files, const PrepareOptions& opt) {
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  ProgressMeter meter(opt.progress, "hash", total, opt.progress_seconds);
  std::mutex mu;
  uint64_t done = 0;
  std::vector<std::string> sha(files.size());
  std::vector<char> binary(files.size(), 0);
  std::atomic<size_t> next{0};
  auto work = [&]() {
    std::vector<char> buf(4 << 20);
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      const InputFile& f = files[i];
      std::FILE* in = std::fopen(f.path.c_str(), "rb");
      if (!in) throw Error("cannot open input file " + f.path + ": " + std::strerror(errno));
      core::Sha256 h;
      size_t got;
      while ((got = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
        h.update(buf.data(), got);
        std::lock_guard<std::mutex> lock(mu);
        done += got;
        meter.update(done, 0);
      }
      const bool failed = std::ferror(in);
      std::fclose(in);
      if (failed) throw Error("error reading input file " + f.path);
      sha[i] = h.hex_digest();
      binary[i] = is_binary_text_file(f);
    }
  };
  const int nt = std::min<int>(thread_count(opt), std::max<size_t>(1, files.size()));
  std::vector<std::future<void>> pool;
  for (int t = 0; t < nt; ++t) pool.push_back(std::async(std::launch::async, work));
  for (auto& p : pool) p.get();
  meter.finish(total, 0);

  nlohmann::json hashes = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    hashes.push_back(sha[i]);
    if (binary[i]) skipped.push_back(i);
  }
  return {{"hashes", hashes}, {"skipped", skipped}};
}

std::vector<InputFile> text_files(const std::vector<InputFile>& all_files,
                                  nlohmann::json& hashes_record, std::vector<bool>* skipped,
                                  std::vector<std::string>* skipped_files) {
  skipped->assign(all_files.size(), false);
  for (const auto& i : hashes_record["skipped"]) skipped->at(i.get<size_t>()) = true;
  std::vector<InputFile> files;
  for (size_t i = 0; i < all_files.size(); ++i) {
    if ((*skipped)[i]) {
      // Name the first few; a directory of index files (fortune's *.dat) would flood the log.
      if (skipped_files->size() < kMaxNamedSkips) {
        log::warn("skipping binary file " + all_files[i].path + " (NUL bytes in its first 8 KB)");
      }
      skipped_files->push_back(all_files[i].path);
    } else {
      files.push_back(all_files[i]);
    }
  }
  if (skipped_files->size() > kMaxNamedSkips) {
    log::warn(log::format("... skipped %zu more binary files (listed in prepare.json)",
                          skipped_files->size() - kMaxNamedSkips));
  }
  return files;
}

}  // namespace lmtrain::data::prepare_detail
