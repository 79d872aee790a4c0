#!/usr/bin/env python3
"""Minimal nanoGPT-style GPT-2 trainer: the PyTorch-Python speed reference for lmtrain.

Written the way a competent PyTorch user would write it (idiomatic PyTorch 2.x, no
hand-written kernels), so that `bench/compare_cpu.sh` and `bench/compare_gpu.sh` compare
lmtrain against an honest baseline. Eager by default; `--compile` wraps the model in
torch.compile. On a GPU (`--device cuda`) it does what nanoGPT does: bf16 autocast
(`--dtype bf16`), F.scaled_dot_product_attention (flash), fused AdamW, TF32 matmuls.

Trains on random tokens from a fixed-seed generator; the batches are generated before
timing starts. The last two lines printed are always:

    ms_per_step: X
    tokens_per_s: Y

Run with the venv's interpreter (scripts/setup.sh): .venv/bin/python bench/reference/train_gpt2.py

Data parallel: launched by torchrun with WORLD_SIZE > 1, it runs as ordinary PyTorch DDP on
CPU, the reference for `lmtrain launch`:

    /usr/bin/torchrun --nproc_per_node=2 --master_port=29641 --redirects 9:0 --tee 9:0 \
        bench/reference/train_gpt2.py --threads 1 ...

(`--redirects 9:0 --tee 9:0` only works around a bug of Debian's torchrun 1.13 on Python
3.11: the defaults "0" parse to None in Std.from_str and torchrun dies with "'NoneType' object
has no attribute 'get'"; a mapping for a local rank that does not exist (up to 9 ranks per
node) parses and leaves every real rank's output on the console.)

Each rank joins a Gloo process group (init_process_group("gloo"), env:// rendezvous from
torchrun's variables), wraps the model in DistributedDataParallel with default settings
(25 MiB gradient buckets, allreduce overlapped with backward) and trains on its own
micro-batches of --batch_size rows, generated from seed + rank so that ranks see different
data. The model is initialised from --seed on every rank (DDP also broadcasts rank 0's
weights). The timed loop is bracketed by barriers so that rank 0's clock covers every rank's
steps. Only rank 0 prints; it adds a `world_size: N` line before final_loss (its own local
loss), and tokens_per_s is the GLOBAL throughput:
batch_size * seq_len * world_size * steps / elapsed. ms_per_step is per (global) step.
Without torchrun (or with WORLD_SIZE=1) nothing changes: no process group, no DDP.
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, sdpa=False):
        super().__init__()
        assert n_embd % n_head == 0, "n_embd must be divisible by n_head"
        self.sdpa = sdpa
        self.n_head = n_head
        self.n_embd = n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.c_proj.RESIDUAL_SCALE_INIT = True
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        # (B, T, C) -> (B, H, T, D)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.sdpa:  # flash / memory-efficient attention where available
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, H, T, D)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.c_proj.RESIDUAL_SCALE_INIT = True

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, sdpa=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, sdpa)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, sdpa=False):
        super().__init__()
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.n_layer = n_layer
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head, block_size, sdpa) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd, eps=1e-5),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = 0.02
            if getattr(module, "RESIDUAL_SCALE_INIT", False):
                std = 0.02 / math.sqrt(2 * self.n_layer)
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        assert T <= self.block_size, f"sequence length {T} > block_size {self.block_size}"
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizer(self, lr, weight_decay, betas, eps, fused=False):
        # Decay every matrix except the embeddings (wte is tied to lm_head, so the shared
        # tensor counts as an embedding); biases and LayerNorm params are never decayed.
        no_decay_ids = {id(self.transformer.wte.weight), id(self.transformer.wpe.weight)}
        decay, no_decay = [], []
        for p in self.parameters():  # parameters() deduplicates the tied weight
            if p.dim() >= 2 and id(p) not in no_decay_ids:
                decay.append(p)
            else:
                no_decay.append(p)
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)


def parse_args():
    p = argparse.ArgumentParser(description="nanoGPT-style GPT-2 training speed reference")
    p.add_argument("--n_layer", type=int, default=4)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--n_embd", type=int, default=128)
    p.add_argument("--vocab_size", type=int, default=8192)
    p.add_argument("--block_size", type=int, default=None, help="default: --seq_len")
    p.add_argument("--seq_len", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=12)
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--pool", type=int, default=8, help="distinct random batches, cycled")
    p.add_argument("--log_every", type=int, default=0, help="print a line every N steps (0: off)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                   help="bf16 = autocast to bfloat16 (fp32 master weights)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--grad_reduce_dtype", default="fp32", choices=["fp32", "bf16"],
                   help="DDP: bf16 = all-reduce the gradients in bf16 (PyTorch's "
                        "bf16_compress_hook; lmtrain's train.grad_reduce_dtype=bf16)")
    p.add_argument("--attention", default=None, choices=["manual", "sdpa"],
                   help="default: sdpa on cuda, manual (masked softmax) on cpu")
    p.add_argument("--overfit", action="store_true",
                   help="sanity check: train on one fixed batch and print loss every step")
    p.add_argument("--profile", default=None, metavar="FILE",
                   help="record the timed steps with torch.profiler: a chrome trace to FILE and "
                        "the ops (and CUDA kernels) that took the most time printed; profiling "
                        "slows the steps, so use it for breakdowns, not for timing")
    args = p.parse_args()
    if args.block_size is None:
        args.block_size = args.seq_len
    if args.attention is None:
        args.attention = "sdpa" if args.device == "cuda" else "manual"
    if args.seq_len > args.block_size:
        p.error("--seq_len must be <= --block_size")
    if args.steps < 1 or args.warmup < 0 or args.threads < 1 or args.pool < 1:
        p.error("need --steps >= 1, --warmup >= 0, --threads >= 1, --pool >= 1")
    return args


def main():
    args = parse_args()
    # torchrun sets WORLD_SIZE (and RANK, MASTER_ADDR, MASTER_PORT) for each worker.
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1
    is_main = rank == 0
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # only allowed before any inter-op parallel work has started
    torch.manual_seed(args.seed)
    cuda = args.device == "cuda"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    model = GPT(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                sdpa=args.attention == "sdpa").to(device)
    model.train()
    optimizer = model.configure_optimizer(lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8,
                                          fused=cuda)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    if distributed:
        # The optimizer keeps the raw module's parameters: DDP trains those same tensors and
        # averages their .grad across ranks during backward, before clipping and the step.
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device] if cuda else None)
        if args.grad_reduce_dtype == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if args.compile:
        model = torch.compile(model)
    autocast = torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16,
                              enabled=args.dtype == "bf16")

    B, T = args.batch_size, args.seq_len
    # Per-rank data (seed + rank): in DDP each rank trains on a different micro-batch.
    gen = torch.Generator().manual_seed(args.seed + rank)
    n_pool = 1 if args.overfit else args.pool
    pool = []
    for _ in range(n_pool):
        tokens = torch.randint(0, args.vocab_size, (B, T + 1), generator=gen)
        pool.append((tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)))

    log = print if is_main else (lambda *a, **k: None)
    log(
        f"reference gpt2: n_layer={args.n_layer} n_head={args.n_head} n_embd={args.n_embd} "
        f"vocab_size={args.vocab_size} block_size={args.block_size} seq_len={T} batch_size={B} "
        f"params={n_params} ({n_params / 1e6:.2f}M) threads={torch.get_num_threads()} "
        f"interop_threads={torch.get_num_interop_threads()} torch={torch.__version__} "
        f"warmup={args.warmup} steps={args.steps} device={args.device} dtype={args.dtype} "
        f"compile={args.compile} attention={args.attention}"
        + (f" world_size={world_size} backend=gloo ddp" if distributed else ""),
        flush=True,
    )

    def train_step(step):
        x, y = pool[step % n_pool]
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss

    log_every = 1 if args.overfit else args.log_every
    for step in range(args.warmup):
        loss = train_step(step)
        if log_every:
            log(f"warmup {step}: loss {loss.item():.4f}", flush=True)

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    if distributed:
        dist.barrier()  # start the clock with every rank ready
    prof = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(activities=activities)
        prof.__enter__()
    t0 = time.perf_counter()
    t_last = t0
    for i in range(args.steps):
        loss = train_step(args.warmup + i)
        if log_every and (i + 1) % log_every == 0:
            # .item() is a sync point; on CPU it costs nothing extra since ops are eager.
            now = time.perf_counter()
            log(f"step {i}: loss {loss.item():.4f} "
                f"ms {(now - t_last) * 1000.0 / log_every:.1f}", flush=True)
            t_last = now
    if cuda:
        torch.cuda.synchronize()
    if distributed:
        dist.barrier()  # stop it only when the slowest rank has finished its steps
    elapsed = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.profile)
        log(f"profile: trace of {args.steps} step(s) written to {args.profile}")
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        log(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=60))
    if cuda:
        log(f"peak_mem_mib: {torch.cuda.max_memory_allocated() / 2**20:.1f}")

    if distributed:
        log(f"world_size: {world_size}")
    log(f"final_loss: {loss.item():.4f}")
    log(f"ms_per_step: {elapsed * 1000.0 / args.steps:.3f}")
    log(f"tokens_per_s: {B * T * world_size * args.steps / elapsed:.1f}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
