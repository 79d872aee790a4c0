// Data parallelism's side of a deferred token lookup (model/deferred_lookup.h): the sink that
// hands a tied table's lookup rows to GradSync, so the table's bucket goes out with the LM
// head's gradient early in backward and only the rows of this step's tokens travel after it.
// It defers a lookup when the rows the ranks would gather (world x tokens) are no more than the
// table's rows: past that an all-reduce of the whole table moves fewer bytes.
#pragma once
#include <cstdint>

#include "distributed/grad_sync.h"
#include "model/deferred_lookup.h"

namespace lmtrain::train {

class DeferredTableGrad : public model::LookupGradSink {
 public:
  // `param`: the table's index among `sync`'s parameters; the table is (rows, width).
  DeferredTableGrad(dist::GradSync& sync, size_t param, int64_t rows, int64_t width, int world);

  bool defers(int64_t tokens) const override { return world_ * tokens <= rows_; }
  bool take(const at::Tensor& ids, const at::Tensor& rows) override {
    return sync_.add_late_rows(param_, ids, rows);
  }

 private:
  dist::GradSync& sync_;
  size_t param_;
  int64_t rows_;
  int64_t world_;
};

}  // namespace lmtrain::train
