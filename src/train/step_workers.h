// Intra-process data parallelism for CPU training steps.
//
// On a few CPU cores, the small GEMMs and elementwise kernels of a language model scale poorly
// with intra-op threads: every op forks and joins the OpenMP team (measured: 2 intra-op threads
// give ~1.4x one thread on bench-small). Running each micro-batch as k slices on k threads,
// each doing its own forward/backward with one intra-op thread, keeps every core busy for the
// whole step instead. Gradients come back per slice (torch::autograd::grad, no shared
// accumulation), and are summed in slice order, so results are deterministic for a given k.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lmtrain::train {

class StepWorkers {
 public:
  // `count` threads in all: count-1 background threads plus the caller.
  explicit StepWorkers(int count);
  ~StepWorkers();
  StepWorkers(const StepWorkers&) = delete;
  StepWorkers& operator=(const StepWorkers&) = delete;

  int count() const { return count_; }
  // Runs fn(0), ..., fn(count-1) concurrently (fn(0) on the caller) with one intra-op thread
  // each; returns when all are done, rethrowing the first exception.
  void run(const std::function<void(int)>& fn);

 private:
  void loop(int index);

  int count_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool shutdown_ = false;
  std::exception_ptr error_;
};

}  // namespace lmtrain::train
