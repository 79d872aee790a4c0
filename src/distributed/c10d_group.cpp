// dist::Group over a c10d backend: ProcessGroupGloo (CPU tensors) or ProcessGroupNCCL (CUDA
// builds, tensors on this rank's GPU). Every c10d failure is rethrown as an lmtrain::Error naming
// this rank and the collective, so a dead peer reads as such rather than as a socket error.
// An NCCL group also holds a Gloo companion over the same ranks for CPU tensors (flags,
// counters, fingerprints, text), as torch.distributed's "cpu:gloo,cuda:nccl" does: a CPU tensor
// never goes through the GPU, so exchanging one (the trainer's per-step stop flag) costs no
// device synchronisation, and callers above need not know the backend.
#include <algorithm>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "core/error.h"
#include "core/log.h"
#include "distributed/c10d_backends.h"
#include "distributed/c10d_error.h"
#include "distributed/c10d_work.h"
#include "distributed/comm_bytes.h"
#include "distributed/debug_level.h"

namespace lmtrain::dist {
namespace {

class C10dGroup : public Group {
 public:
  C10dGroup(Backends backends, BackendChoice kind, int rank, int size,
            c10::intrusive_ptr<c10d::Store> store, BackendFactory factory, c10::Device device)
      : pg_(std::move(backends.main)),
        host_(std::move(backends.host)),
        kind_(kind),
        rank_(rank),
        size_(size),
        store_(std::move(store)),
        factory_(std::move(factory)),
        device_(device) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return core::to_string(kind_); }

  std::unique_ptr<Group> split(const std::vector<int>& ranks) override {
    const int index = split_index(ranks, rank_, size_);
    // Every rank counts its split calls, so all agree on the store prefix of this one.
    const std::string prefix = "split" + std::to_string(splits_++) + "/";
    if (index < 0) return nullptr;
    auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
    const int n = static_cast<int>(ranks.size());
    try {
      return std::make_unique<C10dGroup>(factory_(store, index, n), kind_, index, n, store,
                                         factory_, device_);
    } catch (const std::exception& e) {
      throw Error(log::format("rank %d: building a %s sub-group of %d ranks failed: %s", rank_,
                              backend().c_str(), n, brief_error(e).c_str()));
    }
  }

  std::shared_ptr<Work> allreduce(at::Tensor& tensor, ReduceOp op) override {
    const bool host = on_host(tensor);
    auto staged = stage(tensor, host);
    std::vector<at::Tensor> tensors{staged};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    count_all_reduce(tensor.numel() * tensor.element_size(), size_);
    auto work = run("allreduce", staged, [&] { return pg(host).allreduce(tensors, opts); });
    std::function<void()> finish = [t = tensor, staged, avg = op == ReduceOp::kAvg,
                                    n = size_]() mutable {
      if (avg) staged.div_(n);
      if (!staged.is_same(t)) t.copy_(staged);
    };
    return wrap(std::move(work), "allreduce", std::move(finish));
  }

  std::shared_ptr<Work> broadcast(at::Tensor& tensor, int root) override {
    check_rank(root, "broadcast root");
    const bool host = on_host(tensor);
    auto staged = stage(tensor, host);
    std::vector<at::Tensor> tensors{staged};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    count_broadcast(tensor.numel() * tensor.element_size(), size_);
    return wrap(run("broadcast", staged, [&] { return pg(host).broadcast(tensors, opts); }),
                "broadcast", unstage(tensor, staged));
  }

  std::shared_ptr<Work> allgather(std::vector<at::Tensor>& outputs,
                                  const at::Tensor& input) override {
    if (static_cast<int>(outputs.size()) != size_) {
      throw Error(log::format("allgather needs %d outputs, got %zu", size_, outputs.size()));
    }
    const bool host = on_host(input);
    count_all_gather(input.numel() * input.element_size(), size_);
    if (host || kind_ == BackendChoice::kGloo) return allgather_by_broadcasts(outputs, input, host);
    std::vector<at::Tensor> staged_out;
    for (auto& o : outputs) staged_out.push_back(stage(o, host));
    std::vector<std::vector<at::Tensor>> out{staged_out};
    std::vector<at::Tensor> in{stage(input, host)};
    auto work = run("allgather", input, [&] { return pg(host).allgather(out, in); });
    // The backend writes into the tensors it was given (views of `outputs` share storage).
    return wrap(std::move(work), "allgather", [outputs, staged_out]() mutable {
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (!staged_out[i].is_same(outputs[i])) outputs[i].copy_(staged_out[i]);
      }
    });
  }

  std::shared_ptr<Work> reduce_scatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                       ReduceOp op) override {
    if (static_cast<int>(inputs.size()) != size_) {
      throw Error(log::format("reduce_scatter needs %d inputs, got %zu", size_, inputs.size()));
    }
    // NCCL's reduce-scatter splits its input into W equal chunks; ZeRO-2's bucket parts differ
    // in size wherever a bucket straddles a shard boundary, and those take the path below.
    const bool equal_parts = std::all_of(inputs.begin(), inputs.end(), [&](const at::Tensor& t) {
      return t.numel() == inputs.front().numel();
    });
    int64_t input_bytes = 0;
    for (const auto& t : inputs) input_bytes += t.numel() * t.element_size();
    count_reduce_scatter(input_bytes, size_);
    if (kind_ == BackendChoice::kNccl && !on_host(output) && equal_parts) {
      return reduce_scatter_native(output, inputs, op);
    }
    // ProcessGroupGloo has no reduce-scatter. An all-to-all sends chunk r of every rank to rank
    // r — the traffic of a ring reduce-scatter, (W-1)/W of the data — and the W received
    // chunks are reduced here, always in rank order, so every run sums identically.
    std::vector<int64_t> in_splits;
    for (auto& t : inputs) in_splits.push_back(t.numel());
    auto send = concatenated(inputs);
    const int64_t n = output.numel();
    auto recv = at::empty({n * size_}, send.options());
    std::vector<int64_t> out_splits(size_, n);
    auto exchanged = exchange(recv, send, out_splits, in_splits);
    return std::make_shared<C10dWork>(c10::intrusive_ptr<c10d::Work>(), "reduce_scatter",
                                      [exchanged, recv, output, op, size = size_]() mutable {
                                        exchanged->wait();
                                        reduce_in_rank_order(recv, output, op, size);
                                      });
  }

  std::shared_ptr<Work> all_to_all(at::Tensor& output, const at::Tensor& input,
                                   const std::vector<int64_t>& output_splits,
                                   const std::vector<int64_t>& input_splits) override {
    // Sent: everything but the rows this rank sends itself.
    const int64_t row_bytes =
        input.size(0) > 0 ? input.numel() / input.size(0) * input.element_size() : 0;
    const int64_t kept_rows = input_splits.size() == static_cast<size_t>(size_)
                                  ? input_splits[static_cast<size_t>(rank_)]
                                  : input.size(0) / size_;
    count_all_to_all((input.size(0) - kept_rows) * row_bytes);
    return exchange(output, input, output_splits, input_splits);
  }

  // The all-to-all itself, uncounted: Gloo's reduce-scatter runs on it and counts itself.
  std::shared_ptr<Work> exchange(at::Tensor& output, const at::Tensor& input,
                                 const std::vector<int64_t>& output_splits,
                                 const std::vector<int64_t>& input_splits) {
    auto check = [&](const std::vector<int64_t>& splits, const at::Tensor& t, const char* which) {
      if (splits.empty()) {
        if (t.size(0) % size_ != 0) {
          throw Error(log::format("all_to_all: %s has %lld rows, not a multiple of %d", which,
                                  (long long)t.size(0), size_));
        }
        return;
      }
      int64_t total = 0;
      for (auto v : splits) total += v;
      if (static_cast<int>(splits.size()) != size_ || total != t.size(0)) {
        throw Error(log::format("all_to_all: %s splits do not cover its %lld rows in %d parts",
                                which, (long long)t.size(0), size_));
      }
    };
    check(output_splits, output, "output");
    check(input_splits, input, "input");
    const bool host = on_host(input);
    at::Tensor in = stage(input, host);
    at::Tensor out = stage(output, host);
    std::vector<int64_t> out_s = output_splits, in_s = input_splits;
    c10d::AllToAllOptions opts;
    auto work =
        run("all_to_all", in, [&] { return pg(host).alltoall_base(out, in, out_s, in_s, opts); });
    return wrap(std::move(work), "all_to_all", unstage(output, out));
  }

  // Over the host backend where there is one: a barrier orders processes, not GPU streams (an
  // NCCL barrier would also wait for this rank's queued GPU work).
  void barrier() override {
    wrap(run("barrier", at::Tensor(), [&] { return pg(host_ != nullptr).barrier(); }), "barrier",
         {})
        ->wait();
  }

 private:
  // NCCL: reduce-scatter of adjacent inputs in one call (ReduceOp::AVG done as SUM + divide,
  // as for Gloo, so both backends round alike).
  std::shared_ptr<Work> reduce_scatter_native(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                              ReduceOp op) {
    auto in = stage(concatenated(inputs), false);
    auto out = stage(output, false).view({-1});
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = to_c10d(op);
    auto work = run("reduce_scatter", in, [&] { return pg_->_reduce_scatter_base(out, in, opts); });
    return wrap(std::move(work), "reduce_scatter",
                [output, out, avg = op == ReduceOp::kAvg, n = size_]() mutable {
                  if (avg) out.div_(n);
                  auto o = output.view({-1});
                  if (!out.is_same(o)) o.copy_(out);
                });
  }

  // Gloo: rank r's piece goes out as a broadcast from r, the size() broadcasts launched at once,
  // in root order on every rank. Gloo's own allgather copies through flat staging buffers and
  // cost about three times the CPU of the same bytes as broadcasts: 2 ranks, 27.8 MB each, 51 to
  // 62 ms of a rank's CPU per call against 15 to 16 ms (torch.distributed over Gloo on loopback,
  // 2026-11-28), CPU that a data-parallel step on busy cores pays in full.
  std::shared_ptr<Work> allgather_by_broadcasts(std::vector<at::Tensor>& outputs,
                                                const at::Tensor& input, bool host) {
    for (const auto& o : outputs) {
      if (o.numel() != input.numel() || o.scalar_type() != input.scalar_type()) {
        throw Error(log::format("allgather: outputs must match the input's %lld %s elements",
                                (long long)input.numel(),
                                std::string(c10::toString(input.scalar_type())).c_str()));
      }
    }
    // Gloo broadcasts contiguous tensors in place: a non-contiguous output gets a buffer.
    std::vector<at::Tensor> staged;
    for (auto& o : outputs) {
      auto t = stage(o, host);
      staged.push_back(t.is_contiguous() ? t : t.contiguous());
    }
    staged[static_cast<size_t>(rank_)].view({-1}).copy_(input.reshape({-1}));
    std::vector<std::shared_ptr<Work>> parts;
    for (int r = 0; r < size_; ++r) {
      std::vector<at::Tensor> tensors{staged[static_cast<size_t>(r)]};
      c10d::BroadcastOptions opts;
      opts.rootRank = r;
      parts.push_back(
          wrap(run("allgather", tensors[0], [&] { return pg(host).broadcast(tensors, opts); }),
               "allgather", {}));
    }
    return wrap(c10::intrusive_ptr<c10d::Work>(), "allgather", [parts, outputs, staged]() mutable {
      for (auto& p : parts) p->wait();
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (!staged[i].is_same(outputs[i])) outputs[i].copy_(staged[i]);
      }
    });
  }

  // Whether a collective on `t` goes to the host backend: an NCCL group's CPU tensors do.
  bool on_host(const at::Tensor& t) const { return host_ && t.is_cpu(); }
  c10d::Backend& pg(bool host) { return host ? *host_ : *pg_; }
  // `t` as the chosen backend takes it (a copy where it lies elsewhere): the host backend CPU
  // tensors, NCCL this rank's GPU ones.
  at::Tensor stage(const at::Tensor& t, bool host) const {
    if (host) return t.is_cpu() ? t : t.to(at::kCPU);
    if (kind_ != BackendChoice::kNccl || !t.is_cpu()) return t;
    return t.to(device_);
  }
  // After the collective: copy a staged result back into the caller's tensor.
  static std::function<void()> unstage(const at::Tensor& original, const at::Tensor& staged) {
    if (staged.is_same(original)) return {};
    return [original, staged]() mutable { original.copy_(staged); };
  }

  void check_rank(int r, const char* what) const {
    if (r < 0 || r >= size_) {
      throw Error(log::format("%s %d is outside the world of %d", what, r, size_));
    }
  }

  // `data`: the tensor sent (undefined for a barrier), for TORCH_DISTRIBUTED_DEBUG=DETAIL.
  template <typename F>
  c10::intrusive_ptr<c10d::Work> run(const char* what, const at::Tensor& data, F&& launch) {
    if (debug_ == DebugLevel::kDetail) {
      ++calls_;
      log::info(log::format(
          "TORCH_DISTRIBUTED_DEBUG: rank %d %s call %lld on %d ranks: %lld elements %s (%lld "
          "bytes)",
          rank_, what, (long long)calls_, size_, (long long)(data.defined() ? data.numel() : 0),
          data.defined() ? std::string(c10::toString(data.scalar_type())).c_str() : "-",
          (long long)(data.defined() ? data.numel() * data.element_size() : 0)));
    }
    try {
      return launch();
    } catch (const std::exception& e) {
      throw Error(
          log::format("rank %d: %s could not start: %s", rank_, what, brief_error(e).c_str()));
    }
  }

  std::shared_ptr<Work> wrap(c10::intrusive_ptr<c10d::Work> work, const char* what,
                             std::function<void()> finish) {
    return std::make_shared<C10dWork>(std::move(work), log::format("rank %d: %s", rank_, what),
                                      std::move(finish));
  }

  c10::intrusive_ptr<c10d::Backend> pg_;
  c10::intrusive_ptr<c10d::Backend> host_;  // NCCL groups: the Gloo companion for CPU tensors
  BackendChoice kind_;                      // gloo or nccl (resolved, never auto)
  int rank_, size_;
  c10::intrusive_ptr<c10d::Store> store_;
  BackendFactory factory_;
  c10::Device device_;
  int splits_ = 0;
  DebugLevel debug_ = torch_distributed_debug();
  int64_t calls_ = 0;
};

}  // namespace

std::unique_ptr<Group> make_c10d_group(Backends backends, BackendChoice kind, int rank, int size,
                                       c10::intrusive_ptr<c10d::Store> store,
                                       BackendFactory factory, c10::Device device) {
  return std::make_unique<C10dGroup>(std::move(backends), kind, rank, size, std::move(store),
                                     std::move(factory), device);
}

}  // namespace lmtrain::dist
