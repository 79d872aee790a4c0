// The model, its objective, the flat trained parameters, the optimizer and the schedule of a
// run (train/run_setup_steps.h).
#include <optional>

#include "checkpoint/lora_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "distill/distill_setup.h"
#include "model/build_model.h"
#include "model/lora.h"
#include "model/temporal/temporal_encoder.h"
#include "optim/optimizer_factory.h"
#include "parallel/sharded_init.h"
#include "parallel/vocab_parallel_distill.h"
#include "train/init_from_shard.h"
#include "train/run_setup_steps.h"
#include "train/temporal_setup.h"

namespace lmtrain::train {
namespace {

// Whether this run takes ZeRO-3's sharded set-up (parallel/sharded_init.h): dist.zero=3 over a
// shard group of several ranks, each step of its set-up done by parts; every such run does, but
// under tensor parallelism (its own set-up: TP ranks draw just their slices). A temporal run's
// frozen LM is read by range as a LoRA base is (init_temporal_lm_shard; on resume from the LM
// its checkpoint records). model.init_from and a resume are read by range into the shard
// (init_from_shard.h; a LoRA run's adapters so, its base as a fresh run reads it; under expert
// parallelism each rank's experts whole, its rows of every saved stack; a distillation run's
// projections, small, whole into their module, their moments with the shard's range, under
// expert parallelism too). Runs with dist.zero < 3, or one rank, build the whole model.
// The one place this is decided.
// (The master weights are fp32 in every run that gets here: cli::read_runtime leaves
// core::Runtime::param_dtype at fp32 whatever train.precision says, bf16 and fp16 being autocast
// compute dtypes; only a distillation teacher's own runtime stores bf16, and the teacher is not
// built here. So no dtype condition: ShardOnly makes the shard in rt.param_dtype all the same.)
bool sharded_set_up(const RunSetup& s, const dist::Group& shard_group, const dist::Group* tp) {
  return s.options.optimizer.zero == 3 && shard_group.size() >= 2 && tp == nullptr;
}

}  // namespace

void build_model_and_optimizer(RunSetup& s, const std::optional<LoadedCheckpoint>& temporal_lm,
                               dist::Group& group, const core::Runtime& rt, dist::Group* tp) {
  const SetupOptions& setup = s.setup;
  const uint64_t seed = s.options.seed;
  s.ep = make_expert_parallel(group, setup.ep, s.setup.model.shape.moe.num_experts);
  const auto& lora = setup.model.lora;
  if (lora.enabled() && s.options.init_from.empty()) {
    throw UsageError(
        "config key 'lora.rank' > 0 fine-tunes a frozen base: set model.init_from to an lmtrain "
        "checkpoint or an `lmtrain import hf` directory");
  }
  // ZeRO-3 shards over the world, or under HSDP over this rank's shard group.
  if (s.options.optimizer.zero == 3) {
    s.shards = parallel::make_shard_groups(group, s.options.optimizer.shard_group_size);
  }
  dist::Group& shard_group = s.shards.shard_group(group);
  const bool sharded = sharded_set_up(s, shard_group, tp);
  const bool resuming = s.resume_dir.has_value();
  torch::manual_seed(seed);
  // A temporal run's LM comes whole from model.init_from: nothing to initialise but LoRA
  // adapters (its second stage). The sharded set-up builds the model unwritten on the CPU and
  // writes its initial weights into this rank's shard once the layout is known (below).
  core::Runtime build_rt = rt;
  if (sharded) build_rt.device = c10::Device(c10::kCPU);  // stays there: FullyShard moves it
  if (tp) {
    // Tensor parallelism builds it unwritten on the CPU in fp32 too: each rank draws only its
    // slices, which TensorParallel places (parallel/tp_local_init.h).
    build_rt.device = c10::Device(c10::kCPU);
    build_rt.param_dtype = at::kFloat;
  }
  s.model = model::build_model(
      setup.model, build_rt,
      {/*init=*/!sharded && !tp && (!s.setup.temporal || lora.enabled()), s.ep.placement});
  if (sharded) parallel::place_model_buffers(*s.model, rt.device);
  double lm_rms = 0;  // a temporal run's: the RMS of its LM's token embeddings
  if (s.setup.temporal && !sharded) {
    // Before the encoder: its projector starts at the scale of the LM's token embeddings.
    LoadedCheckpoint lm = *temporal_lm;
    read_temporal_lm_tensors(lm);
    s.state.lora_base = load_init_weights(*s.model, lm);
    lm_rms = model::temporal::token_embedding_rms(
        s.model->transformer->wte->weight.detach().to(torch::kFloat).cpu());
    log::info("frozen LM from " + temporal_lm->dir);
  } else if (s.setup.temporal) {
    // The sharded set-up reads the LM by range (below); the RMS from its file, block by block.
    lm_rms = temporal_lm_embedding_rms(*temporal_lm);
  }
  if (tp) {
    // Each TP rank draws its slices of the seed's initial weights, one parameter at a time,
    // before the flat buffers are laid out over them: no rank holds the whole model.
    parallel::check_tensor_parallel(s.setup.model.shape, setup.data.seq_len, tp->size());
    torch::manual_seed(seed);
    s.tp = std::make_unique<parallel::TensorParallel>(
        *s.model, *tp, parallel::TpFromSeed{rt.device, rt.param_dtype});
    log::info(
        log::format("tensor parallelism: tp=%d (rank %d of its TP group), sequence-parallel; %d "
                    "data-parallel replica(s); the model built unwritten, this rank's slices "
                    "drawn parameter by parameter (no rank holds the whole model)",
                    tp->size(), tp->rank(), group.size()));
  }
  if (s.ep.active()) {
    s.dispatcher = std::make_shared<AllToAllExpertDispatcher>(*s.ep.ep_group,
                                                              s.setup.model.shape.moe.num_experts);
    s.model->set_expert_dispatcher(s.dispatcher);
    log::info(log::format(
        "expert parallelism: ep=%d, this rank holds experts [%lld, %lld) of %lld per MoE layer; "
        "%d replica(s) of each expert",
        s.ep.ep, (long long)s.ep.placement.first,
        (long long)(s.ep.placement.first + s.ep.placement.count),
        (long long)s.setup.model.shape.moe.num_experts, group.size() / s.ep.ep));
  }
  // What the step optimises: the LM loss, or distillation (whose feature projections, when the
  // widths differ, train beside the model in the same flat buffers).
  // data.document_mask: windows split into documents after each <|endoftext|>.
  // (eot_id() is unsigned: without the cast the -1 of "no mask" became 4294967295, a token that
  // never matches, and every run took the document-masked path.)
  const int64_t document_end =
      setup.data.document_mask ? static_cast<int64_t>(s.tokenizer->eot_id()) : int64_t{-1};
  s.objective = std::make_shared<LmObjective>(document_end);
  if (setup.distill.enabled) {
    auto distill =
        make_distill_objective(setup.distill, setup.data.seq_len, rt, s.setup.model.shape,
                               s.tokenizer->hash(), s.windows->teacher_cache(), seed);
    if (tp) {
      // The student's logits stay split by vocabulary: the loss too (the teacher replicated,
      // its head cut to this rank's rows). cli::check_tp_run refuses the rest of distill.*.
      distill->set_split_loss([tp](const at::Tensor& hs, const at::Tensor& ws, const at::Tensor& ht,
                                   const at::Tensor& wt, const at::Tensor& targets,
                                   const model::DistillLossSpec& spec) {
        return parallel::vocab_parallel_distill_loss(hs, ws, ht, wt, targets, spec, *tp);
      });
      log::info(
          "distillation under tensor parallelism: the loss over this rank's vocabulary "
          "rows (N, V / tp) of both models' logits, the teacher replicated on every rank");
    }
    s.objective = std::move(distill);
  } else if (s.setup.temporal) {
    s.objective = make_temporal_objective(setup.encoder, *s.model, lm_rms, rt, seed);
  }
  // Validation scores the run's loss without training-only terms: the LM loss for LM and
  // distillation runs, the answer loss for a temporal run.
  s.val_objective = s.setup.temporal ? s.objective : std::make_shared<LmObjective>(document_end);
  // (ZeRO-3 over several ranks: no whole gradient buffer, optim/flat_params.h.)
  const int64_t pad = optim::flat_pad_multiple(s.options.optimizer, shard_group.size());
  if (sharded) {
    // Born sharded: this rank's shard (zeros) on the device, nothing whole; the initial
    // weights drawn from the seed as a whole build draws them, one parameter at a time.
    s.flat = std::make_unique<optim::FlatParams>(
        trained_param_sources(*s.model, s.objective.get()), pad,
        optim::ShardOnly{shard_group.rank(), shard_group.size(), s.ep.active(),
                         torch::TensorOptions().device(rt.device).dtype(rt.param_dtype)});
    // A resume reads its shard from the checkpoint (resume_or_init): nothing to draw.
    if (!resuming && s.setup.temporal) {
      // The frozen LM by range (its pieces when FullyShard shards it), LoRA's adapters drawn.
      auto frozen = init_temporal_lm_shard(*temporal_lm, *s.model, *s.flat,
                                           s.setup.model.lora.enabled(), seed);
      s.frozen_source = std::move(frozen.read);
      s.state.lora_base = std::move(frozen.lora_base);
      log::info("frozen LM from " + temporal_lm->dir + " (this rank's pieces, read by range)");
    } else if (!resuming) {
      torch::manual_seed(seed);
      parallel::init_shard_from_seed(*s.model, *s.flat);
    }
    log::info(log::format(
        "ZeRO-3 sharded set-up: the model built unwritten, this rank's shard of %lld of %lld "
        "flat elements %s (no rank holds the whole model)",
        (long long)s.flat->shard_numel(), (long long)s.flat->numel(),
        resuming ? "to be read from the resumed checkpoint by range"
                 : "initialised parameter by parameter"));
  } else {
    s.flat = std::make_unique<optim::FlatParams>(
        trained_param_sources(*s.model, s.objective.get()), pad,
        optim::flat_grad_buffer(s.options.optimizer, shard_group.size()));
  }
  s.flat->set_expert_first(s.ep.placement.first);
  s.optimizer = optim::make_optimizer(s.options.optimizer, *s.flat, shard_group,
                                      s.ep.active() ? s.ep.ep_group.get() : nullptr);
  s.schedule = s.options.schedule.over(s.max_steps);

  log::info(s.setup.model.shape.describe());
  if (lora.enabled()) {
    log::info(log::format("LoRA: rank %lld, alpha %g, targets %s: %lld trainable parameters",
                          (long long)lora.rank, lora.alpha,
                          model::lora_target_list(lora.targets).c_str(),
                          (long long)s.flat->num_parameters()));
  }
  log::info(s.options.batch.describe());
  log::info(log::format("optimizer: %s, %.1f MiB of state on this rank",
                        s.optimizer->name().c_str(), s.optimizer->state_bytes() / 1048576.0));
}

}  // namespace lmtrain::train
