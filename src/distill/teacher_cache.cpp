#include "distill/teacher_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "core/fault_injection.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/stop_signal.h"
#include "data/batch.h"
#include "data/window_stream.h"

namespace lmtrain::train {

bool write_teacher_cache(const std::string& path, model::GptImpl& teacher,
                         const data::WindowStream& stream, TeacherCacheInfo info,
                         int64_t batch_windows, const core::Runtime& rt) {
  const int64_t W = stream.num_windows(), T = stream.seq_len(), K = info.top_k;
  info.windows = W;
  info.seq_len = T;
  info.vocab_size = teacher.config().vocab_size;
  if (K < 1 || K >= info.vocab_size) {
    throw UsageError("--top_k = " + std::to_string(K) + ": expected 1 .. the vocabulary size " +
                     std::to_string(info.vocab_size) + " - 1");
  }
  const std::string prefix = teacher_cache_prefix(info);

  // Two passes over the windows would double the teacher's work; instead the logits go to a
  // second temporary file and are appended after the indices.
  core::AtomicFileWriter out(path);
  // Named like the AtomicFileWriter's "<path>.tmp.<pid>", so that core::check_output_file
  // removes both when a killed writer left them.
  const std::string logit_tmp = path + ".tmp." + std::to_string(::getpid()) + ".logits";
  FILE* logits = std::fopen(logit_tmp.c_str(), "w+b");
  if (!logits) throw Error("cannot create " + logit_tmp + ": " + std::strerror(errno));
  struct Cleanup {
    FILE* f;
    std::string p;
    ~Cleanup() {
      std::fclose(f);
      std::remove(p.c_str());
    }
  } cleanup{logits, logit_tmp};
  out.write(prefix);
  teacher.eval();
  torch::NoGradGuard no_grad;
  core::Progress progress("distill-cache", W, "windows");
  for (int64_t w0 = 0; w0 < W; w0 += batch_windows) {
    // SIGINT/SIGTERM: both temporaries are removed on the way out, the path left as it was.
    if (core::stop_requested()) return false;
    const int64_t n = std::min(batch_windows, W - w0);
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = w0 + i;
    auto [x, y] = data::make_batch(stream, ids, rt.device);
    at::Tensor z;
    {
      core::AutocastScope autocast(rt);
      z = teacher.logits(teacher.final_hidden(x));  // (n, T, V)
    }
    z = z.to(at::kFloat);
    auto [vals, idx] = at::topk(z, K, -1);                                 // (n, T, K) each
    auto lse = at::logsumexp(z / info.temperature, -1, /*keepdim=*/true);  // (n, T, 1)
    auto idx32 = idx.to(at::kInt).cpu().contiguous();
    auto vals32 = at::cat({vals, lse}, -1).cpu().contiguous();  // (n, T, K + 1)
    out.write(idx32.data_ptr<int32_t>(), idx32.numel() * sizeof(int32_t));
    const size_t bytes = vals32.numel() * sizeof(float);
    if (std::fwrite(vals32.data_ptr<float>(), 1, bytes, logits) != bytes) {
      throw Error("cannot write " + logit_tmp + ": " + std::strerror(errno));
    }
    core::maybe_inject_fault(0, w0 / batch_windows + 1);  // tests: a signal after this batch
    progress.add(n);
  }
  std::rewind(logits);
  std::vector<char> buf(1 << 20);
  for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), logits)) > 0;) {
    out.write(buf.data(), got);
  }
  if (std::ferror(logits)) throw Error("cannot read back " + logit_tmp);
  out.commit();
  return true;
}

TeacherCache::TeacherCache(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot open teacher cache " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UsageError("distill.cache = " + path +
                     " is not a file (a directory?): give the cache file that `lmtrain "
                     "distill-cache --output FILE` wrote");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ == 0) {
    ::close(fd);
    throw Error("teacher cache " + path + " is empty (rewrite it with `lmtrain distill-cache`)");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("cannot map " + path + ": " + std::strerror(errno));
  }
  const auto* bytes = static_cast<const unsigned char*>(map_);
  try {
    const auto layout = parse_teacher_cache(bytes, map_bytes_, path);
    info_ = layout.info;
    index_ = reinterpret_cast<const int32_t*>(bytes + layout.index_offset);
    logit_ = reinterpret_cast<const float*>(bytes + layout.logit_offset);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

TeacherCache::~TeacherCache() {
  if (map_) ::munmap(map_, map_bytes_);
}

std::pair<at::Tensor, at::Tensor> TeacherCache::rows(const std::vector<int64_t>& window_ids,
                                                     const c10::Device& device) const {
  const auto n = static_cast<int64_t>(window_ids.size());
  const int64_t T = info_.seq_len, K = info_.top_k, row = T * K, logit_row = T * (K + 1);
  auto logits = torch::empty({n, T, K + 1}, torch::kFloat);
  auto index = torch::empty({n, T, K}, torch::kInt);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t w = window_ids[i];
    if (w < 0 || w >= info_.windows) {
      throw Error(log::format("teacher cache %s has %lld windows; window %lld was asked for",
                              path_.c_str(), (long long)info_.windows, (long long)w));
    }
    std::memcpy(logits.data_ptr<float>() + i * logit_row, logit_ + w * logit_row,
                logit_row * sizeof(float));
    std::memcpy(index.data_ptr<int32_t>() + i * row, index_ + w * row, row * sizeof(int32_t));
  }
  if (n > 0 &&
      (index.min().item<int32_t>() < 0 || index.max().item<int32_t>() >= info_.vocab_size)) {
    throw Error("teacher cache " + path_ + " holds a token id outside its vocabulary of " +
                std::to_string(info_.vocab_size) +
                " (damaged; rewrite it with `lmtrain distill-cache`)");
  }
  return {logits.to(device), index.to(torch::kLong).to(device)};
}

}  // namespace lmtrain::train
