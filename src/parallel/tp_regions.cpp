#include "parallel/tp_regions.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <chrono>

#include "core/error.h"

namespace lmtrain::train {
namespace {

std::atomic<int64_t> tp_comm_ns{0};

// Adds the wait of a blocking collective to the process's TP communication time.
class TpCommTimer {
 public:
  TpCommTimer() : t0_(std::chrono::steady_clock::now()) {}
  ~TpCommTimer() {
    tp_comm_ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_)
            .count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

dist::Group* group_of(AutogradContext* ctx) {
  return reinterpret_cast<dist::Group*>(ctx->saved_data["group"].toInt());
}

at::Tensor all_reduce(const at::Tensor& x, dist::Group& g) {
  auto y = x.contiguous().clone();
  TpCommTimer timer;
  g.allreduce(y, dist::ReduceOp::kSum)->wait();
  return y;
}

// The ranks' pieces concatenated along `dim`.
at::Tensor all_gather(const at::Tensor& x, int64_t dim, dist::Group& g) {
  const auto piece = x.movedim(dim, 0).contiguous();  // gathered along dim 0, then moved back
  std::vector<at::Tensor> parts(g.size());
  for (auto& p : parts) p = at::empty_like(piece);
  {
    TpCommTimer timer;
    g.allgather(parts, piece)->wait();
  }
  return at::cat(parts, 0).movedim(0, dim);
}

// The sum over ranks of x, this rank's piece along `dim`.
at::Tensor reduce_scatter(const at::Tensor& x, int64_t dim, dist::Group& g) {
  const int64_t n = x.size(dim);
  if (n % g.size() != 0) {
    throw Error("tensor parallel: dimension " + std::to_string(dim) + " of size " +
                std::to_string(n) + " does not split over " + std::to_string(g.size()) + " ranks");
  }
  const auto moved = x.movedim(dim, 0).contiguous();
  std::vector<at::Tensor> parts;
  for (auto& p : moved.chunk(g.size(), 0)) parts.push_back(p.contiguous());
  auto out = at::empty_like(parts[0]);
  {
    TpCommTimer timer;
    g.reduce_scatter(out, parts, dist::ReduceOp::kSum)->wait();
  }
  return out.movedim(0, dim);
}

class CopyToTp : public torch::autograd::Function<CopyToTp> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, dist::Group* g) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(g);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce(grads[0], *group_of(ctx)), at::Tensor()};
  }
};

class ReduceFromTp : public torch::autograd::Function<ReduceFromTp> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, dist::Group* g) {
    return all_reduce(x, *g);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

class GatherSequence : public torch::autograd::Function<GatherSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            dist::Group* g) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(g);
    ctx->saved_data["dim"] = dim;
    return all_gather(x, dim, *g);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter(grads[0], ctx->saved_data["dim"].toInt(), *group_of(ctx)), at::Tensor(),
            at::Tensor()};
  }
};

class ScatterSequence : public torch::autograd::Function<ScatterSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            dist::Group* g) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(g);
    ctx->saved_data["dim"] = dim;
    return reduce_scatter(x, dim, *g);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gather(grads[0], ctx->saved_data["dim"].toInt(), *group_of(ctx)), at::Tensor(),
            at::Tensor()};
  }
};

class GatherLastDim : public torch::autograd::Function<GatherLastDim> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, dist::Group* g) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(g);
    return all_gather(x, x.dim() - 1, *g);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = group_of(ctx);
    return {grads[0].chunk(g->size(), -1)[g->rank()].contiguous(), at::Tensor()};
  }
};

// x (.., m, ..) as rank `from` holds it (all-gathered along dim: a collective on every rank),
// zeros where `from` is outside the group.
at::Tensor piece_of_rank(const at::Tensor& x, int64_t dim, dist::Group& g, int from) {
  const auto all = all_gather(x, dim, g);  // (.., m T, ..)
  if (from < 0 || from >= g.size()) return at::zeros_like(x);
  return all.narrow(dim, from * x.size(dim), x.size(dim)).contiguous();
}

// last (.., 1, ..): this rank's last position -> the previous rank's (zeros on rank 0); the
// gradient of what this rank received goes back to the rank before it.
class PreviousRankLast : public torch::autograd::Function<PreviousRankLast> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& last, int64_t dim,
                            dist::Group* g) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(g);
    ctx->saved_data["dim"] = dim;
    return piece_of_rank(last, dim, *g, g->rank() - 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = group_of(ctx);
    return {piece_of_rank(grads[0], ctx->saved_data["dim"].toInt(), *g, g->rank() + 1),
            at::Tensor(), at::Tensor()};
  }
};

int64_t checked_dim(const at::Tensor& x, int64_t dim) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim()) throw Error("tensor parallel: no dimension " + std::to_string(dim));
  return d;
}

}  // namespace

void add_tp_comm_seconds(double seconds) { tp_comm_ns += static_cast<int64_t>(seconds * 1e9); }

void timed_tp_allreduce(at::Tensor& t, dist::ReduceOp op, dist::Group& group) {
  TpCommTimer timer;
  group.allreduce(t, op)->wait();
}

double take_tp_comm_seconds() { return static_cast<double>(tp_comm_ns.exchange(0)) * 1e-9; }

at::Tensor copy_to_tp(const at::Tensor& x, dist::Group& group) {
  return group.size() == 1 ? x : CopyToTp::apply(x, &group);
}

at::Tensor reduce_from_tp(const at::Tensor& x, dist::Group& group) {
  return group.size() == 1 ? x : ReduceFromTp::apply(x, &group);
}

at::Tensor gather_sequence(const at::Tensor& x, int64_t dim, dist::Group& group) {
  return group.size() == 1 ? x : GatherSequence::apply(x, checked_dim(x, dim), &group);
}

at::Tensor scatter_sequence(const at::Tensor& x, int64_t dim, dist::Group& group) {
  return group.size() == 1 ? x : ScatterSequence::apply(x, checked_dim(x, dim), &group);
}

at::Tensor gather_last_dim(const at::Tensor& x, dist::Group& group) {
  return group.size() == 1 ? x : GatherLastDim::apply(x, &group);
}

at::Tensor shift_sequence_right(const at::Tensor& x, int64_t dim, dist::Group& group) {
  const int64_t d = checked_dim(x, dim), n = x.size(d);
  const auto halo = group.size() == 1
                        ? at::zeros_like(x.narrow(d, 0, 1))
                        : PreviousRankLast::apply(x.narrow(d, n - 1, 1), d, &group);  // (.., 1, ..)
  return at::cat({halo, x.narrow(d, 0, n - 1)}, d);
}

}  // namespace lmtrain::train
