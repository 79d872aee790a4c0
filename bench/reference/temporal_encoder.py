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
    if padded > L:
        x = F.pad(x, (0, padded - L))
        mask = F.pad(mask, (0, padded - L))
    xp = x.unfold(2, patch_len, stride).permute(0, 2, 1, 3).reshape(B, P, C * patch_len)
    mp = mask.unfold(2, patch_len, stride).permute(0, 2, 1, 3).reshape(B, P, C * patch_len)
    return torch.cat([xp, mp], -1), mp.sum(-1) > 0


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
        self.patch_embed = torch.nn.Linear(2 * channels * patch_len, width)
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
        else:
            x = x[:, 1:]
            tvalid = pvalid
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
    counts = [num_tokens if num_tokens > 0 else P_of(37), num_tokens if num_tokens > 0 else P_of(20)]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-fixture")
    mk.add_argument("--lm", required=True, help="a Hugging Face decoder directory")
    mk.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "make-fixture":
        make_fixture(args.lm, args.out)


if __name__ == "__main__":
    main()
