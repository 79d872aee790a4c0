"""PyTorch reference of lmtrain's time-series encoder (src/model/temporal/temporal_encoder.h):
the same computation with the same parameter names, and the soft-token loss through a frozen
Hugging Face decoder (inputs_embeds). `make-fixture` writes what the C++ parity test compares
against (tests/e2e/temporal_parity_test.cpp):

    .venv/bin/python bench/reference/temporal_encoder.py make-fixture \
        --lm tests/fixtures/hf/qwen2 --out tests/fixtures/temporal

For each variant (one soft token per patch; attention-pooled to 3 tokens) it stores the
encoder's weights, the batch (curves with padding and a missing value stored as NaN, token ids
with placeholder slots, answer-only targets), the loss and the gradient of every encoder
parameter, all in fp32 on the CPU.

`make-lm` writes a random Hugging Face Qwen2 decoder of a given shape (Qwen2.5-0.5B's by
default) for `lmtrain import hf`; `bench` times this wrapper's training step (encoder + projector
trained by AdamW, the LM frozen, fp32 weights under bf16 autocast like lmtrain's
train.precision=bf16), eager or with torch.compile, on batches shaped as lmtrain's temporal batches
(rows of seq_len tokens, series padded to max_length, a soft token per valid patch); `flops`
prints the model FLOPs per sample both sides' MFU is counted with. bench/temporal_gpu.sh runs
them beside `lmtrain train --config configs/pretrain_temporal.yaml`.
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

MIN_STD = 1e-5  # series_norm.h kMinSeriesStd


def patches_for(length, patch_len, stride):
    if length <= patch_len:
        return 1
    return 1 + (length - patch_len + stride - 1) // stride


def normalise_series(values, valid):
    w = valid.to(values.dtype)
    x = torch.where(valid, values, torch.zeros_like(values))
    count = w.sum(-1).clamp_min(1.0)
    mean = x.sum(-1) / count
    centred = (x - mean.unsqueeze(-1)) * w
    std = (centred.pow(2).sum(-1) / count).sqrt().clamp_min(MIN_STD)
    return centred / std.unsqueeze(-1), mean, std


def make_patches(values, valid, patch_len, stride):
    B, C, L = values.shape
    P = patches_for(L, patch_len, stride)
    padded = (P - 1) * stride + patch_len
    mask = valid.to(values.dtype)
    x = torch.where(valid, values, torch.zeros_like(values))
    # the local deviation x_t - (x_{t-1} + x_{t+1}) / 2 where all three are valid, else 0
    prev = F.pad(x, (1, 0))[..., :L]
    nxt = F.pad(x, (0, 1))[..., 1:]
    both = mask * F.pad(mask, (1, 0))[..., :L] * F.pad(mask, (0, 1))[..., 1:]
    dev = (x - 0.5 * (prev + nxt)) * both
    if padded > L:
        x = F.pad(x, (0, padded - L))
        dev = F.pad(dev, (0, padded - L))
        mask = F.pad(mask, (0, padded - L))
    cut = lambda t: t.unfold(2, patch_len, stride).permute(0, 2, 1, 3).reshape(B, P, C * patch_len)
    mp = cut(mask)
    return torch.cat([cut(x), cut(dev), mp], -1), mp.sum(-1) > 0


def attention(q, k, v, key_valid, heads):
    B, Sq, W = q.shape
    Sk = k.shape[1]
    D = W // heads
    split = lambda t, S: t.reshape(B, S, heads, D).transpose(1, 2)
    y = F.scaled_dot_product_attention(split(q, Sq), split(k, Sk), split(v, Sk),
                                       attn_mask=key_valid.reshape(B, 1, 1, Sk))
    return y.transpose(1, 2).reshape(B, Sq, W)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class Block(torch.nn.Module):
    def __init__(self, width, heads, mlp_ratio, eps):
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(width, eps=eps)
        self.attn_qkv = torch.nn.Linear(width, 3 * width)
        self.attn_proj = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width, eps=eps)
        self.fc = torch.nn.Linear(width, mlp_ratio * width)
        self.proj = torch.nn.Linear(mlp_ratio * width, width)

    def forward(self, x, key_valid):
        q, k, v = self.attn_qkv(self.ln_1(x)).chunk(3, -1)
        h = x + self.attn_proj(attention(q, k, v, key_valid, self.heads))
        return h + self.proj(F.gelu(self.fc(self.ln_2(h))))


class TemporalEncoder(torch.nn.Module):
    def __init__(self, channels, max_length, patch_len, stride, layers, width, heads, mlp_ratio,
                 num_tokens, lm_width, eps=1e-5):
        super().__init__()
        self.o = dict(channels=channels, max_length=max_length, patch_len=patch_len,
                      stride=stride, layers=layers, width=width, heads=heads,
                      mlp_ratio=mlp_ratio, num_tokens=num_tokens, lm_width=lm_width)
        self.patch_embed = torch.nn.Linear(3 * channels * patch_len, width)
        self.stats_embed = torch.nn.Linear(2 * channels, width)
        self.pos = torch.nn.Embedding(patches_for(max_length, patch_len, stride) + 1, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads, mlp_ratio, eps) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width, eps=eps)
        if num_tokens > 0:
            self.pool_queries = torch.nn.Embedding(num_tokens, width)
            self.pool_q = torch.nn.Linear(width, width)
            self.pool_kv = torch.nn.Linear(width, 2 * width)
            self.pool_proj = torch.nn.Linear(width, width)
        self.proj_fc1 = torch.nn.Linear(width, lm_width)
        self.proj_fc2 = torch.nn.Linear(lm_width, lm_width)
        self.proj_norm = RMSNorm(lm_width, eps)

    def forward(self, values, valid):
        o = self.o
        norm, mean, std = normalise_series(values, valid)
        feats, pvalid = make_patches(norm, valid, o["patch_len"], o["stride"])
        B, P = pvalid.shape
        slog = torch.sign(mean) * torch.log1p(mean.abs())
        stats = self.stats_embed(torch.cat([slog, std.log()], -1)).unsqueeze(1)
        x = torch.cat([stats, self.patch_embed(feats)], 1) + self.pos.weight[: P + 1]
        key_valid = torch.cat([torch.ones(B, 1, dtype=torch.bool), pvalid], 1)
        for block in self.blocks:
            x = block(x, key_valid)
        x = self.ln_f(x)
        if o["num_tokens"] > 0:
            q = self.pool_q(self.pool_queries.weight).unsqueeze(0).expand(B, -1, -1)
            k, v = self.pool_kv(x).chunk(2, -1)
            x = self.pool_proj(attention(q, k, v, key_valid, o["heads"]))
            tvalid = torch.ones(B, o["num_tokens"], dtype=torch.bool)
        else:  # the patch tokens, then the stats token (the series' summary)
            x = torch.cat([x[:, 1:], x[:, :1]], 1)
            tvalid = torch.cat([pvalid, torch.ones(B, 1, dtype=torch.bool)], 1)
        return self.proj_norm(self.proj_fc2(F.gelu(self.proj_fc1(x)))), tvalid


def soft_token_loss(encoder, lm, values, valid, ids, slots, targets):
    """Mean cross-entropy over the valid targets of the frozen LM whose input embeddings at
    `slots` are the encoder's valid tokens, in row-major order (model/soft_tokens.h)."""
    tokens, tvalid = encoder(values, valid)
    embeds = lm.get_input_embeddings()(ids)
    embeds = embeds.masked_scatter(slots.unsqueeze(-1), tokens[tvalid].to(embeds.dtype))
    logits = lm(inputs_embeds=embeds).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                           ignore_index=-100)


def fixture_batch(P_of, num_tokens, seq_len, vocab):
    """Two curves of 2 channels (lengths 37 and 20, one missing value), prompts with the
    encoder's soft tokens at positions 2.., and targets on the last 4 positions only."""
    g = torch.Generator().manual_seed(7)
    L = 37
    t = torch.arange(L, dtype=torch.float32)
    values = torch.stack([
        torch.stack([3.0 + 0.05 * t + torch.sin(t / 3), 100 + 10 * torch.randn(L, generator=g)]),
        torch.stack([-2.0 + torch.cos(t / 2), 0.5 * torch.randn(L, generator=g)]),
    ])  # (2, 2, 37)
    valid = torch.ones(2, 2, L, dtype=torch.bool)
    valid[1, :, 20:] = False  # the second series is 20 long
    valid[0, 1, 5] = False  # one missing value
    values[0, 1, 5] = float("nan")  # whatever it holds is never read
    # per patch: the valid patches and the summary token
    counts = [num_tokens if num_tokens > 0 else P_of(37) + 1,
              num_tokens if num_tokens > 0 else P_of(20) + 1]
    ids = torch.randint(1, vocab, (2, seq_len), generator=g)
    slots = torch.zeros(2, seq_len, dtype=torch.bool)
    targets = torch.full((2, seq_len), -100, dtype=torch.long)
    for b, n in enumerate(counts):
        slots[b, 2:2 + n] = True
        ids[b, 2:2 + n] = 0  # the placeholder id: replaced by the soft tokens
        targets[b, seq_len - 5:seq_len - 1] = ids[b, seq_len - 4:]
    return values, valid, ids, slots, targets


def make_fixture(lm_dir, out_dir):
    from transformers import AutoModelForCausalLM

    os.makedirs(out_dir, exist_ok=True)
    lm = AutoModelForCausalLM.from_pretrained(lm_dir, dtype=torch.float32)
    lm.eval()
    for p in lm.parameters():
        p.requires_grad_(False)
    lm_width = lm.config.hidden_size
    summary = {"lm": os.path.relpath(lm_dir, os.path.dirname(os.path.abspath(__file__)) + "/../.."),
               "variants": {}}
    for name, num_tokens in [("per_patch", 0), ("pooled", 3)]:
        opts = dict(channels=2, max_length=48, patch_len=8, stride=8, layers=2, width=16,
                    heads=2, mlp_ratio=4, num_tokens=num_tokens, lm_width=lm_width)
        torch.manual_seed(11 + num_tokens)
        enc = TemporalEncoder(**opts)
        with torch.no_grad():  # draw non-trivial norms and biases too
            for p in enc.parameters():
                p.add_(0.05 * torch.randn_like(p))
        weights = {k: v.detach().clone().contiguous() for k, v in enc.state_dict().items()}
        P_of = lambda L: patches_for(L, opts["patch_len"], opts["stride"])
        values, valid, ids, slots, targets = fixture_batch(P_of, num_tokens, 16,
                                                           lm.config.vocab_size)
        loss = soft_token_loss(enc, lm, values, valid, ids, slots, targets)
        loss.backward()
        tensors = {"weight." + k: v for k, v in weights.items()}
        tensors.update({"grad." + k: p.grad.detach().clone().contiguous()
                        for k, p in enc.named_parameters()})
        tensors.update({"values": values.contiguous(),
                        "valid": valid.to(torch.uint8).contiguous(), "ids": ids.contiguous(),
                        "slots": slots.to(torch.uint8).contiguous(),
                        "targets": targets.contiguous(), "loss": loss.detach().reshape(1)})
        save_file(tensors, os.path.join(out_dir, name + ".safetensors"))
        summary["variants"][name] = {"options": opts, "loss": loss.item()}
        print(name, "loss", loss.item())
    with open(os.path.join(out_dir, "fixture.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


# Qwen2.5-0.5B's shape (configs/pretrain_temporal.yaml's model section).
QWEN25_05B = dict(num_hidden_layers=24, hidden_size=896, num_attention_heads=14,
                  num_key_value_heads=2, intermediate_size=4864, vocab_size=151936)


def make_lm(args):
    """A random Qwen2 decoder of the given shape, saved for `lmtrain import hf` (with
    --tokenizer copied beside it: a temporal run writes its prompts with the LM's tokenizer)."""
    import shutil
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = dict(QWEN25_05B)
    for k in shape:
        if getattr(args, k) is not None:
            shape[k] = getattr(args, k)
    cfg = Qwen2Config(**shape, max_position_embeddings=32768, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, tie_word_embeddings=True, hidden_act="silu",
                      use_sliding_window=False)
    torch.manual_seed(0)
    lm = Qwen2ForCausalLM(cfg)
    lm.save_pretrained(args.out)
    shutil.copy(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    n = sum(p.numel() for p in lm.parameters())
    print(f"make-lm: {n / 1e6:.1f}M parameters -> {args.out}")


def lm_shape(lm_dir):
    with open(os.path.join(lm_dir, "config.json")) as f:
        c = json.load(f)
    return c


def encoder_options(args, lm_width):
    return dict(channels=1, max_length=args.max_length, patch_len=args.patch_len,
                stride=args.stride, layers=args.layers, width=args.width, heads=args.heads,
                mlp_ratio=args.mlp_ratio, num_tokens=args.num_tokens, lm_width=lm_width)


def flops_per_sample(args):
    """Model FLOPs of one sample's training step, the count both sides' MFU uses:
    - the frozen LM, per token of the row: 4 N (forward 2 N, the backward's input gradients 2 N;
      no weight gradients) over its matmul parameters N (blocks and head: the tied embedding
      counts once, as the head), plus attention 6 L C T (llm.c's count, forward and backward);
    - the encoder, per patch token: 6 N_enc (all of it trains) plus 6 L_e W P;
    averaged over the series lengths of --lengths (each drawn as often)."""
    c = lm_shape(args.lm)
    C, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    D = C // H
    per_layer = C * H * D + 2 * C * KV * D + H * D * C + 3 * C * c["intermediate_size"]
    n_lm = L * per_layer + V * C
    T = args.seq_len
    lm = T * (4 * n_lm + 6 * L * C * T)
    enc = TemporalEncoder(**encoder_options(args, C))
    n_enc = sum(p.numel() for n_, p in enc.named_parameters() if "weight" in n_ and p.dim() == 2
                and not n_.startswith("pos") and not n_.startswith("pool_queries"))
    lengths = [int(x) for x in args.lengths.split(",")]
    enc_flops = 0.0
    for length in lengths:
        P = patches_for(length, args.patch_len, args.stride)
        enc_flops += (P + 1) * (6 * n_enc + 6 * args.layers * args.width * (P + 1))
    return lm + enc_flops / len(lengths)


def bench_batch(g, B, T, lengths, args, vocab):
    """Rows as lmtrain's temporal_batch makes them: T tokens, one series each padded to
    max_length, its soft tokens at the placeholder (after 24 prompt tokens), 3 answer targets."""
    Lmax = args.max_length
    values = torch.zeros(B, 1, Lmax)
    valid = torch.zeros(B, 1, Lmax, dtype=torch.bool)
    ids = torch.randint(1, vocab, (B, T), generator=g)
    slots = torch.zeros(B, T, dtype=torch.bool)
    targets = torch.full((B, T), -100, dtype=torch.long)
    for b in range(B):
        n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        t = torch.arange(n, dtype=torch.float32)
        values[b, 0, :n] = 0.01 * t + torch.sin(t / 5) + 0.1 * torch.randn(n, generator=g)
        valid[b, 0, :n] = True
        P = patches_for(n, args.patch_len, args.stride) + 1 if args.num_tokens == 0 else args.num_tokens
        slots[b, 24:24 + P] = True
        a = 24 + P + 12  # the question's tokens, then the answer
        targets[b, a - 1:a + 2] = ids[b, a:a + 3]
    return values, valid, ids, slots, targets


def bench(args):
    from transformers import AutoModelForCausalLM

    dev = torch.device(args.device)
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_pretrained(args.lm, dtype=torch.float32).to(dev)
    lm.train()  # as lmtrain's frozen LM in a training run (no dropout either way)
    for p in lm.parameters():
        p.requires_grad_(False)
    enc = TemporalEncoder(**encoder_options(args, lm.config.hidden_size)).to(dev)
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-4, weight_decay=0.01,
                            fused=dev.type == "cuda")
    enc_run, lm_run = enc, lm
    if args.compile:
        enc_run, lm_run = torch.compile(enc), torch.compile(lm)
    vocab = min(lm.config.vocab_size, args.prompt_vocab)
    g = torch.Generator().manual_seed(1)
    lengths = [int(x) for x in args.lengths.split(",")]
    pool = [tuple(t.to(dev) for t in bench_batch(g, args.batch, args.seq_len, lengths, args, vocab))
            for _ in range(8)]
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.dtype == "bf16")
    embed = lm.get_input_embeddings()

    def step(k):
        for m in range(args.accum):
            values, valid, ids, slots, targets = pool[(k * args.accum + m) % len(pool)]
            with amp:
                tokens, tvalid = enc_run(values, valid)
                e = embed(ids)
                e = e.masked_scatter(slots.unsqueeze(-1), tokens[tvalid].to(e.dtype))
                logits = lm_run(inputs_embeds=e).logits
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                       targets.reshape(-1), ignore_index=-100)
            (loss / args.accum).backward()
        torch.nn.utils.clip_grad_norm_(enc.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for k in range(args.warmup):
        step(k)
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    import time
    t0 = time.perf_counter()
    for k in range(args.steps):
        loss = step(args.warmup + k)
    sync()
    secs = time.perf_counter() - t0
    samples = args.batch * args.accum * args.steps
    print(f"reference ({'compiled' if args.compile else 'eager'}, {args.device}, {args.dtype}): "
          f"loss {loss.item():.4f}, {secs / args.steps * 1e3:.1f} ms/step")
    print(f"samples_per_s: {samples / secs:.2f}")
    if dev.type == "cuda":
        print(f"peak_gpu_gib: {torch.cuda.max_memory_allocated() / 2**30:.2f}")


def add_encoder_args(p):
    # Defaults: configs/pretrain_temporal.yaml's model.temporal and data sections.
    p.add_argument("--lm", required=True, help="a Hugging Face decoder directory")
    p.add_argument("--max_length", type=int, default=1024)
    p.add_argument("--patch_len", type=int, default=16)
    p.add_argument("--stride", type=int, default=16)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--mlp_ratio", type=int, default=4)
    p.add_argument("--num_tokens", type=int, default=0)
    p.add_argument("--seq_len", type=int, default=384)
    p.add_argument("--lengths", default="256,512,1024")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-fixture")
    mk.add_argument("--lm", required=True, help="a Hugging Face decoder directory")
    mk.add_argument("--out", required=True)
    ml = sub.add_parser("make-lm", help="a random Qwen2 decoder (Qwen2.5-0.5B's shape by default)")
    ml.add_argument("--out", required=True)
    ml.add_argument("--tokenizer", required=True, help="a tokenizer.json to put beside it")
    for k in QWEN25_05B:
        ml.add_argument("--" + k, type=int)
    fl = sub.add_parser("flops", help="model FLOPs per sample of a training step")
    add_encoder_args(fl)
    bn = sub.add_parser("bench", help="samples/s of the wrapper's training step")
    add_encoder_args(bn)
    bn.add_argument("--device", default="cuda")
    bn.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    bn.add_argument("--batch", type=int, default=8, help="samples per micro-batch")
    bn.add_argument("--accum", type=int, default=4, help="micro-batches per step")
    bn.add_argument("--steps", type=int, default=20)
    bn.add_argument("--warmup", type=int, default=5)
    bn.add_argument("--prompt_vocab", type=int, default=4096,
                    help="prompt ids are drawn below this (the tokenizer's size)")
    bn.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    if args.cmd == "make-fixture":
        make_fixture(args.lm, args.out)
    elif args.cmd == "make-lm":
        make_lm(args)
    elif args.cmd == "flops":
        print(f"flops_per_sample: {flops_per_sample(args):.6g}")
    else:
        bench(args)


if __name__ == "__main__":
    main()
