#include "parallel/deferred_table_grad.h"

namespace lmtrain::train {

DeferredTableGrad::DeferredTableGrad(dist::GradSync& sync, size_t param, int64_t rows,
                                     int64_t width, int world)
    : sync_(sync), param_(param), rows_(rows), world_(world) {
  sync_.expect_late_rows(param, rows, width);
}

}  // namespace lmtrain::train
