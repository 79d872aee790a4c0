// Every configuration key lmtrain knows, with type, default, range and help text.
// This table is the single source of truth: validation, `--help-config`, the resolved
// config.yaml and the README's config reference all come from it.
#include "core/config_schema.h"

#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace lmtrain::core {
namespace {

constexpr double kBig = 9.0e15;  // exactly representable upper bound for integer keys

KeySpec I(const char* path, int64_t def, double min, double max, const char* help) {
  return {path, ValueType::kInt, std::to_string(def), min, max, {}, help};
}
KeySpec F(const char* path, const char* def, double min, double max, const char* help) {
  return {path, ValueType::kFloat, def, min, max, {}, help};
}
KeySpec B(const char* path, bool def, const char* help) {
  return {path, ValueType::kBool, def ? "true" : "false", std::nullopt, std::nullopt, {}, help};
}
KeySpec S(const char* path, const char* def, std::vector<std::string> choices, const char* help) {
  return {path, ValueType::kString, def, std::nullopt, std::nullopt, std::move(choices), help};
}

}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = {
      S("run.dir", "runs/lmtrain", {}, "output directory: config, logs, metrics, checkpoints"),

      S("model.arch", "gpt2",
        {"gpt2", "llama", "qwen2", "qwen3", "nanochat", "qwen3_moe", "mixtral", "mistral"},
        "model family (the options below set the architecture; arch names it for HF I/O)"),
      I("model.n_layer", 4, 1, 1024, "transformer blocks"),
      I("model.n_head", 4, 1, 1024, "attention heads (n_embd must be divisible by n_head)"),
      I("model.n_embd", 128, 1, 65536, "model width"),
      I("model.vocab_size", 0, 0, 1 << 30,
        "vocabulary size; 0 = the tokenizer's vocab rounded up to a multiple of 64"),
      I("model.block_size", 1024, 1, 1 << 20, "maximum sequence length (learned positions)"),
      F("model.dropout", "0", 0, 0.99, "dropout probability on attention and residual paths"),
      B("model.bias", true, "biases in linear layers and LayerNorms"),
      B("model.tie_embeddings", true, "share the token embedding with the output head"),
      S("model.norm", "layernorm", {"layernorm", "rmsnorm"}, "normalisation layers"),
      F("model.norm_eps", "1e-5", 0, 1, "epsilon of the normalisation layers"),
      S("model.pos", "learned", {"learned", "rope"}, "positions: learned table or rotary (RoPE)"),
      F("model.rope_theta", "10000", 1, 1e12, "RoPE base frequency"),
      S("model.rope_scaling", "none", {"none", "linear", "dynamic", "yarn", "llama3"},
        "RoPE frequency scaling, as transformers' rope_type: linear (positions / factor), dynamic "
        "(NTK base grown past rope_original_max), yarn, llama3"),
      F("model.rope_factor", "1", 1, 1e6, "RoPE scaling factor (context extension ratio)"),
      I("model.rope_original_max", 0, 0, 1 << 30,
        "RoPE scaling: the pretraining context (yarn, llama3: original_max_position_embeddings; "
        "dynamic: the length past which the base grows); 0 = model.block_size"),
      F("model.rope_low_freq_factor", "1", 0, 1e6,
        "llama3 scaling: wavelengths over original_max / this are divided by rope_factor"),
      F("model.rope_high_freq_factor", "4", 0, 1e6,
        "llama3 scaling: wavelengths under original_max / this are kept"),
      F("model.rope_beta_fast", "32", 0, 1e6, "yarn scaling: rotations where extrapolation ends"),
      F("model.rope_beta_slow", "1", 0, 1e6, "yarn scaling: rotations where interpolation starts"),
      F("model.rope_attention_factor", "0", 0, 1e6,
        "yarn scaling: cos and sin are multiplied by it; 0 = 0.1 ln(rope_factor) + 1"),
      B("model.rope_truncate", true, "yarn scaling: round the correction range to whole dims"),
      S("model.windows", "", {},
        "sliding-window attention: comma-separated window per layer, tiled over the layers "
        "(\"\" or 0 = full causal attention; \"4096\" = every layer; \"0,0,512\" = every third); a "
        "query attends to the last W keys, itself included"),
      S("model.window_pattern", "", {},
        "nanochat's windows: 'S' (short: a quarter of model.block_size, rounded up to 128) and "
        "'L' (long: the whole context) tiled over the layers, the last always L; a query sees "
        "the window's keys before it and itself (FA3 window_size=(w, 0)); sets model.windows "
        "(\"\" = off)"),
      B("model.norm_weight", true,
        "RMSNorm / LayerNorm weights; false = nanochat's norm() without parameters (blocks, "
        "final and QK-norm)"),
      B("model.embed_norm", false, "RMSNorm on the token embeddings (nanochat)"),
      F("model.qk_scale", "1", 0, 1e6, "q and k times this after the QK-norm (nanochat: 1.2)"),
      B("model.x0_lambdas", false,
        "nanochat's per-layer resid_lambdas and x0_lambdas: a block's input is "
        "r_l x + x0_l x0 (x0: the embedding)"),
      B("model.value_embeds", false,
        "nanochat's value embeddings on alternating layers (the last included), mixed into v by "
        "a per-kv-head gate 3 sigmoid(W x[:12])"),
      B("model.smear", false,
        "nanochat's smear: the previous token's embedding mixed in by a gate on 24 channels"),
      B("model.backout", false,
        "nanochat's backout: lambda times the residual after layer n_layer / 2 taken out before "
        "the final norm"),
      S("model.mlp", "gelu", {"gelu", "swiglu", "relu2"},
        "MLP: GELU(tanh), SwiGLU (silu(gate) * up) or relu^2"),
      I("model.mlp_hidden", 0, 0, 1 << 20, "MLP hidden width (0 = 4 * n_embd)"),
      I("model.n_kv_head", 0, 0, 1024,
        "key/value heads (0 = n_head; fewer = grouped-query attention)"),
      I("model.head_dim", 0, 0, 4096, "width of each head (0 = n_embd / n_head)"),
      B("model.qk_norm", false, "RMSNorm on each head's queries and keys (Qwen3)"),
      B("model.qkv_bias", false,
        "biases on the q, k, v projections even without model.bias (Qwen2)"),
      F("model.logit_softcap", "0", 0, 1e6, "> 0: logits = cap * tanh(logits / cap) (nanochat)"),
      S("model.init_from", "", {},
        "checkpoint (dir, run dir or latest/best link) whose weights start a fresh run, e.g. one "
        "made by `lmtrain import hf`; the optimizer starts anew"),
      I("model.depth", 0, 0, 1024,
        "nanochat sizing: > 0 sets n_layer = depth, n_embd = 64 * depth, heads of 128"),
      F("model.init_std", "0.02", 0, 1,
        "std of the normal init; residual projections get "
        "std/sqrt(2*n_layer)"),

      I("model.moe.num_experts", 0, 0, 1 << 16,
        "Mixture-of-Experts: routed experts per MoE layer (0 = dense model)"),
      I("model.moe.top_k", 2, 1, 1 << 16, "experts each token is routed to"),
      I("model.moe.expert_hidden", 0, 0, 1 << 20,
        "hidden width of each expert MLP (0 = the dense MLP's hidden width)"),
      I("model.moe.shared_experts", 0, 0, 1 << 10,
        "always-on experts every token passes through (DeepSeek / Qwen-MoE style)"),
      I("model.moe.every", 1, 1, 1024,
        "layer l is an MoE layer when (l + 1) % every == 0 (HF decoder_sparse_step)"),
      S("model.moe.dense_layers", "", {},
        "comma-separated layer indices kept dense (HF mlp_only_layers), e.g. \"0,1\""),
      S("model.moe.gate", "softmax", {"softmax", "sigmoid"},
        "router gate: softmax over experts, or per-expert sigmoid (DeepSeek-V3)"),
      B("model.moe.renormalize", true, "rescale each token's top-k gate weights to sum to 1"),
      F("model.moe.capacity_factor", "0", 0, 1e6,
        "0 = dropless; > 0: each expert takes at most ceil(cf * tokens * top_k / experts) "
        "assignments, the rest pass through on the residual (first choices win, then token order)"),
      F("model.moe.aux_loss_coef", "0.01", 0, 1e6,
        "weight of the Switch/GShard load-balancing loss (mean over MoE layers; computed per "
        "micro-batch and rank)"),
      F("model.moe.z_loss_coef", "0", 0, 1e6, "weight of the router z-loss (mean over MoE layers)"),
      F("model.moe.bias_update_rate", "0", 0, 1e6,
        "DeepSeek-V3 auxiliary-loss-free balancing: per-expert selection bias moved by this much "
        "per step toward the global mean load (0 = off)"),

      B("model.temporal.enabled", false,
        "train a time-series encoder whose soft tokens stand at the <ts><ts/> placeholders of "
        "the prompts, aligned to the frozen LM of model.init_from (its shape and tokenizer are "
        "taken from there); data from data.temporal.*"),
      I("model.temporal.channels", 1, 1, 1024, "time-series encoder: variables per series (C)"),
      I("model.temporal.max_length", 1024, 1, 1 << 20,
        "time-series encoder: the longest series accepted (sizes the position table)"),
      I("model.temporal.patch_len", 16, 1, 1 << 16, "time-series encoder: values per patch"),
      I("model.temporal.stride", 16, 1, 1 << 16,
        "time-series encoder: step between patch starts (= patch_len: no overlap)"),
      I("model.temporal.layers", 2, 0, 1024, "time-series encoder: transformer blocks"),
      I("model.temporal.width", 128, 1, 65536, "time-series encoder: width"),
      I("model.temporal.heads", 4, 1, 1024, "time-series encoder: attention heads"),
      I("model.temporal.mlp_ratio", 4, 1, 64, "time-series encoder: MLP hidden = ratio * width"),
      I("model.temporal.num_tokens", 0, 0, 1 << 16,
        "soft tokens per series: 0 = one per patch and a summary token, > 0 = pooled to this "
        "many"),
      S("model.temporal.projector", "mlp", {"mlp", "vocab_mix"},
        "time-series encoder's projector: mlp (fc1, GELU, fc2, RMSNorm at the LM's embedding "
        "RMS) or vocab_mix (softmax over the LM's vocabulary @ its token embeddings: each soft "
        "token a mix of the LM's own word embeddings, Time-LLM's reprogramming)"),

      S("data.dir", "", {}, "directory written by `lmtrain prepare` (tokenizer.json, *.bin)"),
      I("data.seq_len", 256, 1, 1 << 20, "tokens per training window (T)"),
      B("data.shuffle", true, "shuffle windows each epoch (seeded by train.seed and epoch)"),
      S("data.format", "tokens", {"tokens", "chat"},
        "tokens: windows of data.dir's token shards; chat: its conversations with their loss "
        "mask (`lmtrain prepare --chat`), one per row, loss on the assistant's tokens only (SFT)"),
      I("data.chat.bucket", 64, 1, 1 << 20,
        "data.format=chat: a batch is as wide as its longest conversation rounded up to a "
        "multiple of this (at most data.seq_len)"),
      B("data.chat.pack", true,
        "data.format=chat: pack several conversations into each row of data.seq_len tokens, "
        "attention kept inside each conversation and its positions restarting (document "
        "masking; 1.6-1.8x the assistant targets per second of padded rows, bench/chat_pack.sh); "
        "false: one conversation per row, padded by data.chat.bucket"),
      B("data.document_mask", false,
        "data.format=tokens: split each window into its documents after every end-of-text "
        "token (what `lmtrain prepare` ends each document with): attention stays inside a "
        "document and positions restart at each"),
      S("data.source", "prepared", {"prepared", "stream"},
        "prepared: the token shards of data.dir; stream: tokenize data.stream.inputs on the fly "
        "(each rank reads its own files / parquet row groups, resumable to the token)"),
      S("data.stream.inputs", "", {},
        "data.source=stream: files or directories, comma-separated (text, JSONL, .gz/.zst, "
        "parquet), as `lmtrain prepare` takes them"),
      S("data.stream.tokenizer", "", {},
        "data.source=stream: the tokenizer.json to encode with (empty: data.dir's)"),
      S("data.stream.text_column", "text", {},
        "data.source=stream: the JSONL field / parquet column holding the text"),
      S("data.stream.doc_separator", "", {},
        "data.source=stream: a line that separates documents in text files (empty: one "
        "document per file)"),
      F("data.stream.val_fraction", "0.01", 0, 0.5,
        "data.source=stream: share of the units (files, parquet row groups) held out for "
        "validation, chosen by a hash of their names"),
      F("data.stream.block_mb", "64", 0, 1e6,
        "data.source=stream: uncompressed JSONL and separated text files larger than this are "
        "read as blocks of this many MiB, dealt to ranks like parquet row groups (0: whole "
        "files)"),
      I("data.stream.queue_batches", 8, 1, 4096,
        "data.source=stream: micro-batches tokenized ahead at most (the bounded prefetch queue)"),
      I("data.tokenizer_threads", 1, 1, 1024,
        "data.source=stream: threads tokenizing ahead of training"),
      S("data.temporal.dir", "", {},
        "time-series QA samples: a directory written by `lmtrain temporal-data`, or of ChatTS "
        "JSONL files ({\"input\", \"output\", \"timeseries\"})"),
      B("data.temporal.online", false,
        "generate the synthetic samples on the fly (deterministic per data.temporal.seed and "
        "index: equal to `lmtrain temporal-data`'s cached ones) instead of reading "
        "data.temporal.dir"),
      I("data.temporal.num_samples", 10000, 1, kBig,
        "online generation: samples in all (train + val), as `temporal-data --num_samples`"),
      I("data.temporal.seed", 0, 0, kBig, "online generation: the generator's seed"),
      S("data.temporal.lengths", "256", {},
        "online generation: series lengths, comma-separated (as `temporal-data --length`)"),
      S("data.temporal.tasks", "", {},
        "online generation: the tasks to cycle through, comma-separated (as `temporal-data "
        "--tasks`; empty = all)"),
      F("data.temporal.val_fraction", "0.05", 0, 0.9,
        "share of the samples held out for validation: the last ones (a class-balanced block)"),

      I("train.seed", 1337, 0, kBig, "seed for init, data order, dropout and sampling"),
      I("train.micro_batch_size", 8, 1, 1 << 20, "windows per rank per micro-step (B)"),
      I("train.total_batch_size", 0, 0, kBig,
        "tokens per optimizer step; 0 = micro_batch_size*seq_len*world_size. Gradient "
        "accumulation = total / (micro_batch_size*seq_len*world_size)"),
      I("train.grad_accum_steps", 0, 0, 1 << 20,
        "micro-steps per optimizer step, when set instead of train.total_batch_size (0 = derive "
        "from it); both set must agree"),
      I("train.max_steps", 0, 0, kBig, "optimizer steps to run (0: use train.epochs)"),
      F("train.target_param_data_ratio", "0", 0, 1e6,
        "nanochat's horizon: with max_steps and epochs 0, steps = ratio * (block and head "
        "parameters) / tokens per step (0 = off)"),
      I("train.stop_at_step", 0, 0, kBig,
        "stop after this many steps (with a checkpoint) without changing the schedule's "
        "horizon: split one run into chunks (0 = off)"),
      I("train.epochs", 0, 0, 1 << 20, "passes over the training windows (when max_steps=0)"),
      F("train.grad_clip", "1.0", 0, 1e9, "clip the global gradient norm to this (0 = off)"),
      I("train.eval_every", 100, 0, kBig, "evaluate on the val split every N steps (0 = at end)"),
      I("train.eval_batches", 20, 1, 1 << 20, "micro-batches per evaluation"),
      I("train.threads", 0, 0, 1024, "intra-op threads per rank (0 = cores / local ranks)"),
      I("train.workers", 0, 0, 1024,
        "threads that each run forward/backward on a slice of every micro-batch with one "
        "intra-op thread (CPU); 0 = auto (train.threads, at most micro_batch_size); 1 = off"),
      S("train.device", "auto", {"auto", "cpu", "cuda"},
        "where the run computes: auto = cuda when a GPU is visible (rank r uses cuda:LOCAL_RANK), "
        "else cpu"),
      S("train.precision", "fp32", {"fp32", "bf16", "fp16", "fp8"},
        "compute precision: fp32; bf16 or fp16 = fp32 master weights and optimizer state, "
        "matmuls and attention in 16 bits (autocast). fp16 adds dynamic loss scaling and needs "
        "CUDA. fp8 = bf16 with the blocks' linear layers on fp8 GEMMs (per-tensor current "
        "scaling; CUDA compute capability 8.9+, e.g. H100). bf16 and fp8 on CPU are correct but "
        "slow (for tests, not speed)"),
      S("train.grad_reduce_dtype", "fp32", {"fp32", "bf16"},
        "dtype gradients are all-reduced (or, under ZeRO-1/2/3, reduce-scattered) in across "
        "ranks (bf16 halves the traffic)"),
      B("train.tf32", true, "CUDA: TF32 tensor cores for fp32 matmuls and convolutions"),
      S("train.attention_backend", "auto", {"auto", "flash", "cudnn", "efficient", "math"},
        "CUDA: the attention kernel libtorch tries first (FlashAttention-2, cuDNN's fused flash "
        "attention, memory-efficient, or the math path); auto keeps libtorch's order. Shapes a "
        "backend cannot run fall back to the next"),
      S("train.fused_kernels", "auto", {"auto", "on", "off"},
        "lmtrain's own kernels (src/kernels): auto = the CPU kernels, and on a GPU the fused "
        "kernels a GPU run has proven (README 'Fused GPU kernels'); on = every fused kernel, on "
        "the CPU through its reference (slow: for tests); off = libtorch's ops everywhere"),
      S("train.cuda_graphs", "auto", {"auto", "true", "false"},
        "CUDA: capture the whole training step into a CUDA graph and replay it (one launch per "
        "step). Needs AdamW, model.dropout=0, NCCL between ranks; MoE only dropless, with "
        "dist.ep=1 and bf16. auto = on where all that holds on a GPU, once a GPU run has proven "
        "them (off until then: README, train.cuda_graphs); true refuses what it cannot capture; "
        "on/off/yes/no read as true/false"),
      I("train.cuda_graph_warmup", 3, 1, 1000,
        "CUDA graphs: eager steps before the step is captured"),
      S("train.activation_checkpointing", "none", {},
        "none; block = recompute every block in backward; every:K = every K-th block. Saves "
        "activation memory for a second forward of those blocks"),
      F("train.loss_scale", "65536", 1, 1e30, "fp16: initial dynamic loss scale"),
      I("train.loss_scale_window", 1000, 1, kBig,
        "fp16: double the loss scale after this many steps without inf/nan gradients"),

      S("optim.name", "adamw", {"adamw", "muon"},
        "optimizer: adamw, or muon (Muon for the blocks' 2-D matrices, AdamW at optim.lr for "
        "embeddings, head, norms and biases)"),
      F("optim.lr", "6e-4", 0, 10, "peak learning rate"),
      F("optim.min_lr_ratio", "0.1", 0, 1,
        "final lr as a fraction of optim.lr (cosine/linear/wsd)"),
      F("optim.weight_decay", "0.1", 0, 10,
        "decoupled weight decay on matrices (never on biases, norms or embeddings)"),
      F("optim.beta1", "0.9", 0, 0.999999, "Adam beta1"),
      F("optim.beta2", "0.95", 0, 0.999999, "Adam beta2"),
      F("optim.eps", "1e-8", 0, 1, "Adam epsilon"),
      S("optim.schedule", "cosine", {"constant", "cosine", "linear", "wsd"},
        "lr schedule after warmup"),
      I("optim.warmup_steps", 0, 0, kBig, "linear warmup steps"),
      F("optim.muon_lr", "0.02", 0, 10, "muon: peak lr of the Muon group (same schedule)"),
      F("optim.embedding_lr", "0", 0, 10,
        "muon: peak lr of the token/position embeddings (AdamW group; 0 = optim.lr)"),
      F("optim.head_lr", "0", 0, 10,
        "muon: peak lr of an untied output head (AdamW group; 0 = optim.lr)"),
      F("optim.muon_momentum", "0.95", 0, 0.999999, "muon: momentum after the warm-up"),
      F("optim.muon_momentum_start", "0.85", 0, 0.999999, "muon: momentum at step 0"),
      I("optim.muon_momentum_warmup", 300, 0, kBig,
        "muon: steps over which momentum goes linearly from start to final"),
      F("optim.decay_fraction", "0.2", 0, 1, "wsd: fraction of steps spent in the final decay"),

      I("checkpoint.every", 0, 0, kBig, "save every N steps (0 = only at the end)"),
      B("checkpoint.every_epoch", false,
        "also save (with an evaluation) at the step that ends each epoch, linked as "
        "checkpoints/epoch_N_step_M; pruning keeps those"),
      I("checkpoint.keep_last", 3, 1, 1 << 20,
        "step checkpoints kept (best, latest and epoch_N_step_M targets always)"),
      S("checkpoint.resume", "", {},
        "\"\" = fresh run, auto = latest in run.dir if any, or a path"),

      I("log.every", 10, 1, kBig, "print/record training metrics every N steps"),
      B("log.tensorboard", true, "write TensorBoard event files to run.dir"),
      B("log.report", true,
        "rank 0 rewrites run.dir/report.html (the page of `lmtrain report`: charts of every "
        "metric, summary) after every evaluation and when the run ends"),

      S("dist.backend", "auto", {"auto", "gloo", "nccl"},
        "collective backend for multi-rank runs: auto = nccl for CUDA, gloo for CPU"),
      F("dist.init_timeout_s", "120", 0.1, 86400,
        "rendezvous deadline: every rank must join the TCPStore within this many seconds"),
      F("dist.timeout_s", "600", 0.1, 86400,
        "deadline for any one collective; a dead or stuck rank becomes an error after it"),
      F("dist.bucket_mb", "25", 0.001, 1 << 20,
        "gradient all-reduce bucket size in MiB (buckets start during backward)"),
      I("dist.zero", 0, 0, 3,
        "ZeRO stage of the optimizer: 0 = replicated; 1 = optimizer state sharded over ranks, "
        "gradients reduce-scattered into each rank's shard (DDP's traffic); 2 = the same (both "
        "keep the whole gradient buffer here); 3 = parameters sharded too, gathered one "
        "transformer block at a time (FSDP)"),
      B("dist.reshard_after_forward", true,
        "dist.zero=3: free a block's gathered parameters after its forward and gather them "
        "again for its backward (false keeps them until backward: more memory, less traffic)"),
      I("dist.shard_group_size", 0, 0, 1 << 16,
        "dist.zero=3: shard over groups of this many consecutive ranks and replicate across "
        "the groups (HSDP: reduce-scatter within a group, all-reduce across); 0 = the world. "
        "Under dist.tp the groups split the world/tp data-parallel ranks"),
      I("dist.tp", 1, 1, 1 << 16,
        "tensor parallelism with sequence parallelism: groups of tp consecutive ranks split "
        "each block's attention heads and MLP width, the token table and the LM head by "
        "vocabulary (Megatron-LM's plan); world/tp data-parallel replicas (dist.zero shards "
        "within them). MoE layers are replicated over the TP group (not with dist.ep); AdamW "
        "or Muon"),
      I("dist.ep", 1, 1, 1 << 16,
        "expert parallelism: groups of ep consecutive ranks split each MoE layer's experts "
        "between them (tokens travel by all-to-all); world/ep data-parallel replicas of each "
        "expert"),

      B("distill.enabled", false,
        "train the model by knowledge distillation from a teacher (loss = alpha * kd + (1 - "
        "alpha) * ce)"),
      S("distill.teacher", "", {},
        "the teacher: an lmtrain checkpoint (dir, run dir, latest/best link) or an `lmtrain "
        "import hf` output; empty = train one first in this command (RUN_DIR/teacher)"),
      I("distill.teacher_hidden_size", 0, 0, 65536,
        "width of the teacher trained first when distill.teacher is empty (0 = 2 * "
        "model.n_embd; heads keep the student's head width)"),
      I("distill.teacher_steps", 0, 0, kBig,
        "optimizer steps of the teacher trained first (0 = the student's train.max_steps)"),
      F("distill.temperature", "4.0", 0.01, 1000,
        "softmax temperature T of the kd term T^2 KL(teacher || student)"),
      F("distill.alpha", "0.7", 0, 1, "weight of the kd term; 1 - alpha weighs the cross-entropy"),
      I("distill.chunk_tokens", 512, 0, 1 << 24,
        "tokens per chunk of the distillation loss (neither model's full logits exist at once); "
        "0 = unchunked (full logits, plain autograd)"),
      S("distill.teacher_dtype", "auto", {"auto", "fp32", "bf16"},
        "the teacher's weights: auto = the runtime's compute dtype on CUDA, fp32 on a CPU"),
      I("distill.top_k", 0, 0, 1 << 30,
        "> 0: the teacher seen through its top_k logits per token plus one bucket for the rest "
        "of the vocabulary, as an offline cache holds it; 0 = the full distribution"),
      S("distill.cache", "", {},
        "an offline teacher written by `lmtrain distill-cache`: its top-k logits of every "
        "training window are read instead of running the teacher"),
      S("distill.feature_layers", "", {},
        "feature distillation: student layers whose output is matched (MSE) to the teacher's, "
        "'S' (the teacher layer at the same relative depth) or 'S:T', comma-separated, or 'all'; "
        "a learned projection maps the widths when they differ; empty = off"),
      F("distill.feature_weight", "1.0", 0, 1e6,
        "weight of the feature term (mean over distill.feature_layers of the per-element MSE)"),
      F("distill.expert_weight", "0", 0, 1e6,
        "> 0: also match every MoE layer's output (its experts' weighted sum) to the teacher MoE "
        "layer at the same relative depth, by MSE with this weight (both models MoE)"),

      I("lora.rank", 0, 0, 1 << 16,
        "LoRA: rank r of the adapters (0 = off). > 0 freezes the base (loaded from "
        "model.init_from, which is then required) and trains only the adapters; under "
        "dist.zero=3 the frozen base is sharded too"),
      F("lora.alpha", "8", 0, 1e6, "LoRA: adapters add (alpha / rank) * B A x"),
      F("lora.dropout", "0", 0, 0.99, "LoRA: dropout on the adapters' input (training only)"),
      S("lora.targets", "q,v", {},
        "LoRA: layers to adapt, a list or comma-separated: q k v o (attention), mlp_in mlp_out "
        "(the MLP's c_fc / c_proj), head (lm_head; untied embeddings only)"),
      S("lora.unfreeze", "", {},
        "LoRA: base parameter groups trained fully beside the adapters (saved in each "
        "checkpoint): comma-separated norms, embeddings, head (an untied lm_head)"),
      B("lora.decay", false,
        "LoRA: apply optim.weight_decay to the adapters (off by default, as peft with HF "
        "Trainer's default weight_decay=0)"),

      I("bench.steps", 20, 1, 1 << 20, "`lmtrain bench`: timed optimizer steps"),
      I("bench.warmup", 3, 0, 1 << 20, "`lmtrain bench`: untimed steps before timing"),
      F("bench.peak_tflops", "0", 0, 1e6,
        "`lmtrain bench` on a GPU: peak TFLOP/s per GPU for MFU (989 = H100 dense bf16); 0 = "
        "measure a GEMM in the compute dtype"),
  };
  return schema;
}

std::vector<std::pair<std::string, int64_t>> depth_scaled_keys(int64_t depth) {
  const int64_t width = 64 * depth;
  return {{"model.n_layer", depth},
          {"model.n_embd", width},
          {"model.n_head", (width + 127) / 128},
          {"model.head_dim", 128}};
}

const std::vector<std::pair<std::string, std::string>>& config_aliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"epochs", "train.epochs"},
      {"save_every", "checkpoint.every"},
      {"batch_size", "train.micro_batch_size"},
      {"lr", "optim.lr"},
      {"resume", "checkpoint.resume"},
      {"output_dir", "run.dir"},
      {"max_steps", "train.max_steps"},
      {"seed", "train.seed"},
      {"data_dir", "data.dir"},
      // nanochat (base_train.py)
      {"depth", "model.depth"},
      {"device_batch_size", "train.micro_batch_size"},
      {"total_batch_size", "train.total_batch_size"},
      {"max_seq_len", "data.seq_len"},
      // nanochat (chat_sft.py; --max_seq_len, --device_batch_size, --total_batch_size above)
      {"num_iterations", "train.max_steps"},
      {"eval_every", "train.eval_every"},
      {"embedding_lr", "optim.embedding_lr"},
      {"unembedding_lr", "optim.head_lr"},
      {"matrix_lr", "optim.muon_lr"},
      {"warmdown_ratio", "optim.decay_fraction"},
      {"final_lr_frac", "optim.min_lr_ratio"},
      // nanochat's dashed flags (scripts/base_train.py today)
      {"device-batch-size", "train.micro_batch_size"},
      {"total-batch-size", "train.total_batch_size"},
      {"max-seq-len", "data.seq_len"},
      {"head-dim", "model.head_dim"},
      {"window-pattern", "model.window_pattern"},
      {"num-iterations", "train.max_steps"},
      {"target-param-data-ratio", "train.target_param_data_ratio"},
      {"embedding-lr", "optim.embedding_lr"},
      {"unembedding-lr", "optim.head_lr"},
      {"matrix-lr", "optim.muon_lr"},
      {"weight-decay", "optim.weight_decay"},
      {"warmup-steps", "optim.warmup_steps"},
      {"eval-every", "train.eval_every"},
      {"save-every", "checkpoint.every"},
      {"warmdown-ratio", "optim.decay_fraction"},
      {"final-lr-frac", "optim.min_lr_ratio"},
      // Qwen3 distributed trainer (run_distributed_training.py)
      {"max_length", "data.seq_len"},
      {"num_epochs", "train.epochs"},
      {"save_dir", "run.dir"},
      // temporal-encoder pretrainer (its YAML training: keys, also as flags)
      {"learning_rate", "optim.lr"},
      {"gradient_accumulation_steps", "train.grad_accum_steps"},
      {"gradient_clip", "train.grad_clip"},
      // the distillation trainer (d_transformers_distillation.py)
      {"teacher_hidden_size", "distill.teacher_hidden_size"},
      {"distillation_temperature", "distill.temperature"},
      {"distillation_alpha", "distill.alpha"},
      {"load_checkpoint", "checkpoint.resume"},
  };
  return aliases;
}

namespace {

const std::string& typed_default(const char* path, ValueType type, const char* type_name) {
  const KeySpec* spec = find_key(path);
  if (!spec || spec->type != type) {
    throw Error(std::string("internal: no ") + type_name + " config key '" + path +
                "' in the schema (core/config_schema.cpp) for an option's default");
  }
  return spec->default_value;
}

}  // namespace

int64_t default_int(const char* path) {
  return std::strtoll(typed_default(path, ValueType::kInt, "integer").c_str(), nullptr, 10);
}

double default_float(const char* path) {
  return std::strtod(typed_default(path, ValueType::kFloat, "float").c_str(), nullptr);
}

bool default_bool(const char* path) {
  return typed_default(path, ValueType::kBool, "boolean") == "true";
}

const std::string& default_string(const char* path) {
  return typed_default(path, ValueType::kString, "string");
}

}  // namespace lmtrain::core
