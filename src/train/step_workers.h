// Intra-process data parallelism for CPU training steps.
//
// On a few CPU cores, the small GEMMs and elementwise kernels of a language model scale poorly
// with intra-op threads: every op forks and joins the OpenMP team (measured: 2 intra-op threads
// give ~1.4x one thread on bench-small). Running each micro-batch as k slices on k threads,
// each doing its own forward/backward with one intra-op thread, keeps every core busy for the
// whole step instead. Gradients come back per slice (torch::autograd::grad, no shared
// accumulation), and are summed in slice order, so results are deterministic for a given k.
//
// The k threads are the process's OpenMP team itself (one `omp parallel` region per call), not
// threads of our own: inside the region every libtorch op and OpenBLAS call sees that it is in
// a parallel region and runs single-threaded, and between calls the same team runs the step's
// multi-threaded ops. With separate std::threads, the OpenMP team's idle threads busy-wait
// (libgomp spins ~ms before sleeping) on the very cores the workers need: measured 10% of the
// step on bench-small with 2 cores.
#pragma once
#include <functional>

namespace lmtrain::train {

class StepWorkers {
 public:
  explicit StepWorkers(int count);

  int count() const { return count_; }
  // Runs fn(0), ..., fn(count-1) concurrently (fn(0) on the caller) with one intra-op thread
  // each; returns when all are done, rethrowing the first exception (by worker index).
  void run(const std::function<void(int)>& fn);

 private:
  int count_;
};

}  // namespace lmtrain::train
