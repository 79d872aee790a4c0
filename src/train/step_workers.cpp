#include "train/step_workers.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <vector>

namespace lmtrain::train {

StepWorkers::StepWorkers(int count) : count_(std::max(1, count)) {}

void StepWorkers::run(const std::function<void(int)>& fn) {
  if (count_ == 1) {
    fn(0);
    return;
  }
  std::vector<std::exception_ptr> errors(count_);
#pragma omp parallel num_threads(count_)
  {
    // The runtime may grant fewer threads than asked for (OMP_THREAD_LIMIT, nesting): the
    // threads it grants take the worker indices in turn.
    const int team = omp_get_num_threads();
    for (int w = omp_get_thread_num(); w < count_; w += team) {
      try {
        fn(w);
      } catch (...) {
        errors[w] = std::current_exception();  // exceptions must not leave the region
      }
    }
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace lmtrain::train
