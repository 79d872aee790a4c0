#include "train/cuda_graph_step.h"

#include <ATen/autocast_mode.h>

#include <chrono>
#include <thread>

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"

#ifdef LMTRAIN_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lmtrain::train {

std::string describe(const CudaGraphOptions& o) {
  std::string line = std::string("CUDA graphs: ") + (o.enabled ? "on" : "off") +
                     " (train.cuda_graphs=" + core::to_string(o.choice);
  if (!o.enabled && o.choice == CudaGraphsChoice::kAuto && !o.why_off.empty()) {
    line += ": " + o.why_off;
  }
  return line + ")";
}

#ifdef LMTRAIN_CUDA

struct CudaGraphStep::Impl {
  Impl(TrainStepper& s, optim::Optimizer& o, int64_t w) : stepper(s), optimizer(o), warmup(w) {}

  TrainStepper& stepper;
  optim::Optimizer& optimizer;
  int64_t warmup;
  int64_t steps_done = 0;
  at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  std::vector<Batch> inputs;  // static: each replay reads its batch from here
  StepResult outputs;         // static: each replay writes its results here
  at::Tensor lr;              // the optimizer's learning-rate scalar (device)
  double grad_clip = 0;
  at::cuda::CUDAEvent last_step;  // recorded on the side stream after each step

  // The capture: copies of this step's batches become the graph's inputs. The capture records
  // without executing, so the first replay runs this step.
  void capture(const std::vector<Batch>& batches, double lr_value, double clip) {
    for (const auto& b : batches) {
      if (b.masked) {
        throw Error(
            "train.cuda_graphs: a batch masks targets, whose count would be fixed at capture");
      }
      Batch copy = b;
      for (auto& [name, t] : copy.tensors) t = t.clone();
      inputs.push_back(std::move(copy));
    }
    lr = optimizer.hold_lr();
    lr.fill_(lr_value);
    grad_clip = clip;
    // Autocast's cache of cast weights would carry casts made outside the capture into it.
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    graph = std::make_unique<at::cuda::CUDAGraph>();
    // As torch.cuda.graph does: the warm-up steps' kernels and collectives finish first, so no
    // earlier work (an NCCL watchdog's event query, a pending free) overlaps the capture. Once.
    c10::cuda::device_synchronize();
    try {
      graph->capture_begin();
      outputs = stepper.step(
          static_cast<int64_t>(inputs.size()), [&](int64_t m) { return inputs[m]; }, lr_value,
          clip);
      graph->capture_end();
    } catch (const std::exception& e) {
      at::autocast::set_autocast_cache_enabled(cache);
      abandon_capture();
      throw Error(std::string("train.cuda_graphs: capturing the training step failed (set "
                              "train.cuda_graphs=false to run it eagerly): ") +
                  e.what());
    }
    at::autocast::set_autocast_cache_enabled(cache);
    log::info(log::format("CUDA graph: step captured after %lld eager step(s); replaying it",
                          (long long)warmup));
  }

  // After a failed capture: end it, so that the side stream leaves capture mode and the
  // allocator stops routing to the graph's pool before the error unwinds (frees, NCCL teardown).
  void abandon_capture() {
    try {
      graph->capture_end();  // throws for an invalidated capture, but ends it all the same
    } catch (const std::exception&) {
    }
    graph.reset();
  }

  // The next step's batches into the static inputs (same stream: ordered before the replay).
  void load(const std::vector<Batch>& batches, double lr_value, double clip) {
    if (batches.size() != inputs.size() || clip != grad_clip) {
      throw Error(log::format(
          "internal: a CUDA graph step was captured with %zu micro-batches and grad_clip %g, "
          "now called with %zu and %g",
          inputs.size(), grad_clip, batches.size(), clip));
    }
    for (size_t m = 0; m < batches.size(); ++m) {
      if (batches[m].valid_tokens != inputs[m].valid_tokens || batches[m].masked) {
        throw Error("train.cuda_graphs: micro-batch valid-token counts must not change");
      }
      for (auto& [name, dst] : inputs[m].tensors) {
        auto it = batches[m].tensors.find(name);
        if (it == batches[m].tensors.end() || !it->second.sizes().equals(dst.sizes())) {
          throw Error("train.cuda_graphs: micro-batch tensor '" + name +
                      "' is missing or changed shape since the capture");
        }
        dst.copy_(it->second, /*non_blocking=*/true);
      }
    }
    lr.fill_(lr_value);
  }

  StepResult results() const {
    StepResult r;
    auto copy = [](const at::Tensor& t) { return t.defined() ? t.clone() : t; };
    r.loss = copy(outputs.loss);
    r.grad_norm = copy(outputs.grad_norm);
    r.metrics = copy(outputs.metrics);
    r.moe = copy(outputs.moe);
    r.skipped = copy(outputs.skipped);  // fp16: this replay's found_inf
    return r;
  }
};

CudaGraphStep::CudaGraphStep(TrainStepper& stepper, optim::Optimizer& optimizer, int64_t warmup)
    : impl_(std::make_unique<Impl>(stepper, optimizer, warmup)) {
  if (warmup < 1) throw UsageError("train.cuda_graph_warmup must be at least 1");
  if (!optimizer.graph_safe()) {
    throw UsageError("train.cuda_graphs: optimizer " + optimizer.name() +
                     " on this device cannot run inside a CUDA graph");
  }
  // Every step runs on the side stream, so the gradient accumulators that DDP's hooks keep
  // alive must belong to it too: one left on the default stream breaks the capture.
  c10::cuda::CUDAStreamGuard on_side(impl_->side);
  stepper.rebind_grad_hooks_to_current_stream();
}

StepResult CudaGraphStep::step(int64_t accum_steps, const BatchFn& next_batch, double lr,
                               double grad_clip) {
  auto& s = *impl_;
  std::vector<Batch> batches;  // made on the caller's stream
  for (int64_t m = 0; m < accum_steps; ++m) batches.push_back(next_batch(m));
  const auto ambient = at::cuda::getCurrentCUDAStream();
  // The side stream waits for the batches and whatever else the caller queued (e.g. a
  // checkpoint load); at the end the caller's stream waits for the step, whose results it reads.
  at::cuda::CUDAEvent ready;
  ready.record(ambient);
  ready.block(s.side);
  StepResult r;
  {
    c10::cuda::CUDAStreamGuard on_side(s.side);
    if (s.steps_done < s.warmup) {
      r = s.stepper.step(
          accum_steps, [&](int64_t m) { return batches[m]; }, lr, grad_clip);
    } else {
      const bool first = !s.graph;
      if (first) {
        s.capture(batches, lr, grad_clip);
      } else {
        s.load(batches, lr, grad_clip);
      }
      s.graph->replay();
      // The capture ran step()'s host code once, counting the first replay's update.
      if (!first) s.optimizer.count_replayed_step();
      r = s.results();
    }
  }
  s.last_step.record(s.side);
  s.last_step.block(ambient);
  ++s.steps_done;
  return r;
}

bool CudaGraphStep::captured() const { return impl_->graph != nullptr; }

void CudaGraphStep::wait_for_steps(double timeout_s, int rank) const {
  const auto start = std::chrono::steady_clock::now();
  while (!impl_->last_step.query()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_s) {
      throw Error(log::format(
          "rank %d: the CUDA-graph training step has not finished after dist.timeout_s=%g s: a "
          "collective inside the graph is waiting for a peer rank that is probably stuck or "
          "dead (see its log); NCCL's watchdog does not watch captured collectives",
          rank, timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

#else  // a build without CUDA

struct CudaGraphStep::Impl {};

CudaGraphStep::CudaGraphStep(TrainStepper&, optim::Optimizer&, int64_t) {
  throw UsageError("train.cuda_graphs=true: this lmtrain was built without CUDA");
}

StepResult CudaGraphStep::step(int64_t, const BatchFn&, double, double) { return {}; }
bool CudaGraphStep::captured() const { return false; }
void CudaGraphStep::wait_for_steps(double, int) const {}

#endif

CudaGraphStep::~CudaGraphStep() = default;

}  // namespace lmtrain::train
