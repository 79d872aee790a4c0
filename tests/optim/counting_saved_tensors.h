// Saved optimizer files held in memory that count the elements read from them, so that a test
// can tell what a resume read (optim/saved_tensors.h).
#pragma once
#include <string>

#include "optim/saved_tensors.h"

namespace lmtrain::optim {

class CountingSavedTensors : public SavedTensorsInMemory {
 public:
  using SavedTensorsInMemory::SavedTensorsInMemory;
  at::Tensor read(size_t file, const std::string& name, int64_t begin,
                  int64_t count) const override {
    read_ += count;
    return SavedTensorsInMemory::read(file, name, begin, count);
  }
  int64_t elements_read() const { return read_; }

 private:
  mutable int64_t read_ = 0;
};

}  // namespace lmtrain::optim
