// The step loop's log lines (train/trainer_parts.h).
#include <cstring>

#include "core/log.h"
#include "observe/moe_step_stats.h"
#include "train/cuda_graph_step.h"
#include "train/trainer_parts.h"

namespace lmtrain::train {

void log_loop_start(TrainStepper& stepper, const RunOptions& options, int workers,
                    const dist::Group& group, const core::Runtime& rt) {
  if (rt.loss_scaling()) {
    log::info(log::format("fp16 loss scale %.6g (doubles after %lld clean steps)",
                          stepper.loss_scaler().scale(), (long long)options.loss_scale_window));
  }
  log::info(
      log::format("step workers: %d (each micro-batch split into %d slice(s))", workers, workers));
  if (group.size() > 1 && stepper.grad_sync()) {
    log::info(log::format("gradient sync: %zu bucket(s) of <= %.3g MiB over %s, %d ranks",
                          stepper.grad_sync()->buckets().size(), options.bucket_mb,
                          group.backend().c_str(), group.size()));
  }
  log::info(describe(options.cuda_graphs));
}

void log_model_state(const RunSetup& s, int64_t params, int64_t grads) {
  const int64_t state = s.optimizer->state_bytes();
  log::info(log::format(
      "model state on this rank (trained_parameters: %lld): parameters %lld + gradients %lld "
      "+ optimizer %lld bytes; model_state_bytes_per_rank: %lld",
      (long long)s.flat->num_parameters(), (long long)params, (long long)grads, (long long)state,
      (long long)(params + grads + state)));
}

void log_frozen_state(int64_t held, int64_t whole) {
  if (whole == 0) return;
  log::info(log::format(
      "frozen parameters on this rank: frozen_bytes_per_rank: %lld (frozen_bytes_whole: %lld)",
      (long long)held, (long long)whole));
}

std::vector<int64_t> moe_layer_indices(const model::GptConfig& mcfg) {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < mcfg.n_layer; ++l) {
    if (mcfg.moe.is_moe_layer(l)) out.push_back(l);
  }
  return out;
}

StepMetrics step_metrics(const TrainingState& state, double loss, const StepResult& r,
                         const std::vector<std::string>& metric_names, double lr,
                         TrainStepper& stepper, const core::Runtime& rt, double train_seconds,
                         const std::vector<int64_t>& moe_layers) {
  StepMetrics m;
  m.step = state.step;
  m.epoch = state.position.epoch;
  m.loss = loss;
  const auto values = r.metric_values();
  for (size_t i = 0; i < metric_names.size(); ++i) m.terms.emplace_back(metric_names[i], values[i]);
  m.lr = lr;
  m.grad_norm = r.grad_norm_value();
  m.loss_scale = stepper.loss_scaler().enabled() ? stepper.loss_scaler().scale() : 0;
  m.skipped_steps = stepper.loss_scaler().state().skipped_steps;
  m.peak_mem_bytes = core::peak_device_memory(rt.device);
  m.elapsed_s = train_seconds;
  m.moe = summarize_moe(r.moe, moe_layers);
  return m;
}

void log_loop_end(const TrainResult& result, const TrainingState& state, int64_t max_steps,
                  const StreamData* stream, int64_t queue_batches, double train_seconds) {
  if (result.stop_signal) {
    log::warn(log::format(
        "stopped by signal %d (%s) at step %lld of %lld; checkpoint %s saved: continue with "
        "--resume=auto",
        result.stop_signal, ::strsignal(result.stop_signal), (long long)state.step,
        (long long)max_steps,
        result.last_checkpoint.empty() ? "(on rank 0)" : result.last_checkpoint.c_str()));
    return;
  }
  if (stream) {
    log::info(log::format(
        "stream loader: the steps waited %.2f s for tokens in %s of training; the queue held up "
        "to %zu of %lld micro-batches",
        stream->wait_seconds(), format_duration(train_seconds).c_str(), stream->max_queued(),
        (long long)queue_batches));
  }
  log::info(log::format(
      "done: %lld steps, last loss %.4f%s, %s of training", (long long)state.step, result.last_loss,
      result.last_val_loss ? log::format(", val loss %.4f", *result.last_val_loss).c_str() : "",
      format_duration(train_seconds).c_str()));
}

}  // namespace lmtrain::train
