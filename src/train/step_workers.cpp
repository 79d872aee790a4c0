#include "train/step_workers.h"

#include <ATen/Parallel.h>
#include <omp.h>

namespace lmtrain::train {
namespace {

// Let libtorch initialise this thread's OpenMP settings first (it does so lazily, once per
// thread, and would otherwise overwrite ours later), then restrict the thread to itself.
void use_single_intra_op_thread() {
  (void)at::get_num_threads();
  omp_set_num_threads(1);
}

}  // namespace

StepWorkers::StepWorkers(int count) : count_(std::max(1, count)) {
  for (int i = 1; i < count_; ++i) threads_.emplace_back([this, i] { loop(i); });
}

StepWorkers::~StepWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void StepWorkers::loop(int index) {
  use_single_intra_op_thread();
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return shutdown_ || generation_ != seen; });
      if (shutdown_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(index);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void StepWorkers::run(const std::function<void(int)>& fn) {
  if (count_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    pending_ = count_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::exception_ptr err;
  try {
    fn(0);
  } catch (...) {
    err = std::current_exception();
  }
  omp_set_num_threads(saved_threads);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (!err) err = error_;
  if (err) std::rethrow_exception(err);
}

}  // namespace lmtrain::train
