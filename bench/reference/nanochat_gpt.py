#!/usr/bin/env python3
"""nanochat's current GPT (karpathy/nanochat, nanochat/gpt.py at 92d63d4) in fp32 PyTorch: the
reference lmtrain's `model.arch: nanochat` is proven against (issue 40).

Written from nanochat's model, each of its newer parts behind a switch so a test can compare
the parts one by one:
  window_pattern  "SSSL" (nanochat's default): tiled over the layers, the last layer always
                  long; a short window is ceil(seq_len / 4 / 128) * 128 tokens, a long one
                  seq_len. A query at position i sees keys i - window .. i (FA3's
                  window_size=(window, 0)); here through SDPA with an explicit boolean mask.
  value_embeds    ResFormer value embeddings on alternating layers (the last one included), mixed
                  into v with a per-head gate 3 * sigmoid(ve_gate(x[..., :12])).
  smear           the previous token's normalised embedding mixed in through a gate on 24
                  channels (smear_lambda * sigmoid(smear_gate(x[..., :24]))).
  backout         the residual at layer n_layer // 2, times backout_lambda, taken out before the
                  final norm.
  head_dim        nanochat derives it (n_embd // n_head); any value is accepted here.
Always on, as in nanochat: resid/x0 lambdas, RMSNorm without weights, RoPE (base 100000,
rotated by -theta: y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos) then QK-norm and a 1.2 scale on
q and k, relu^2 MLP (4x), untied head, logits soft-capped at 15.

Parameter names are nanochat's (transformer.wte.weight, transformer.h.{i}.attn.c_q.weight,
value_embeds.{i}.weight, resid_lambdas, ...).

    nanochat_gpt.py check --config CFG.json --weights W.safetensors --batch B.safetensors
                          --out OUT.safetensors
        loads the weights (nanochat's names), runs forward and backward on B's "idx" and
        "targets" (ignore_index -1), writes "logits", "loss" and "grad.NAME" for every weight.
    nanochat_gpt.py init --config CFG.json --seed S --out W.safetensors
        nanochat's init_weights, in fp32.
    nanochat_gpt.py bench --config CFG.json --batch_size B --steps N [--threads T]
        forward + backward tokens/s on random tokens (AdamW on every parameter), the last line
        "tokens_per_s: X".
CFG.json: {"sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd", "head_dim"
(optional), "window_pattern", "value_embeds", "smear", "backout"}.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file


def norm(x):
    return F.rms_norm(x, (x.size(-1),))


def has_ve(i, n_layer):
    return i % 2 == (n_layer - 1) % 2


def rotary(x, cos, sin):  # x (B, T, H, D)
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos + x2 * sin, x1 * (-sin) + x2 * cos], 3)


def window_sizes(cfg):
    pattern = cfg["window_pattern"].upper()
    assert pattern and all(c in "SL" for c in pattern), pattern
    long = cfg["sequence_len"]
    short = -(-long // 4 // 128) * 128
    sizes = [long if pattern[i % len(pattern)] == "L" else short for i in range(cfg["n_layer"])]
    sizes[-1] = long
    return sizes


class Attention(nn.Module):
    def __init__(self, cfg, i):
        super().__init__()
        C, H, K = cfg["n_embd"], cfg["n_head"], cfg["n_kv_head"]
        self.H, self.K, self.D = H, K, cfg.get("head_dim") or C // H
        self.c_q = nn.Linear(C, H * self.D, bias=False)
        self.c_k = nn.Linear(C, K * self.D, bias=False)
        self.c_v = nn.Linear(C, K * self.D, bias=False)
        self.c_proj = nn.Linear(H * self.D, C, bias=False)
        self.ve_gate = (nn.Linear(12, K, bias=False)
                        if cfg["value_embeds"] and has_ve(i, cfg["n_layer"]) else None)

    def forward(self, x, ve, cos, sin, mask):
        B, T, _ = x.shape
        q = self.c_q(x).view(B, T, self.H, self.D)
        k = self.c_k(x).view(B, T, self.K, self.D)
        v = self.c_v(x).view(B, T, self.K, self.D)
        if ve is not None:
            gate = 3 * torch.sigmoid(self.ve_gate(x[..., :12]))  # (B, T, K)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.K, self.D)
        q, k = norm(rotary(q, cos, sin)) * 1.2, norm(rotary(k, cos, sin)) * 1.2
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, D)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           enable_gqa=self.K != self.H)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, cfg, i):
        super().__init__()
        C = cfg["n_embd"]
        self.attn = Attention(cfg, i)
        self.mlp = nn.ModuleDict({"c_fc": nn.Linear(C, 4 * C, bias=False),
                                  "c_proj": nn.Linear(4 * C, C, bias=False)})

    def forward(self, x, ve, cos, sin, mask):
        x = x + self.attn(norm(x), ve, cos, sin, mask)
        h = F.relu(self.mlp["c_fc"](norm(x))).square()
        return x + self.mlp["c_proj"](h)


class NanochatGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        V, C, L = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"]
        D = cfg.get("head_dim") or C // cfg["n_head"]
        self.transformer = nn.ModuleDict({"wte": nn.Embedding(V, C),
                                          "h": nn.ModuleList(Block(cfg, i) for i in range(L))})
        self.lm_head = nn.Linear(C, V, bias=False)
        self.resid_lambdas = nn.Parameter(torch.ones(L))
        self.x0_lambdas = nn.Parameter(torch.zeros(L))
        if cfg["smear"]:
            self.smear_gate = nn.Linear(24, 1, bias=False)
            self.smear_lambda = nn.Parameter(torch.zeros(1))
        if cfg["backout"]:
            self.backout_lambda = nn.Parameter(0.2 * torch.ones(1))
        self.value_embeds = nn.ModuleDict(
            {str(i): nn.Embedding(V, cfg["n_kv_head"] * D) for i in range(L)
             if cfg["value_embeds"] and has_ve(i, L)})
        self.windows = window_sizes(cfg)
        inv_freq = 1.0 / (100000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        freqs = torch.outer(torch.arange(cfg["sequence_len"], dtype=torch.float32), inv_freq)
        self.register_buffer("cos", freqs.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", freqs.sin()[None, :, None, :], persistent=False)

    @torch.no_grad()
    def init_weights(self):  # nanochat's init_weights, fp32
        C, L = self.cfg["n_embd"], self.cfg["n_layer"]
        nn.init.normal_(self.transformer.wte.weight, std=0.8)
        nn.init.normal_(self.lm_head.weight, std=0.001)
        s = 3**0.5 * C**-0.5
        for b in self.transformer.h:
            for w in (b.attn.c_q, b.attn.c_k, b.attn.c_v):
                nn.init.uniform_(w.weight, -s, s)
            nn.init.zeros_(b.attn.c_proj.weight)
            nn.init.uniform_(b.mlp["c_fc"].weight, -s * 0.4, s * 0.4)
            nn.init.zeros_(b.mlp["c_proj"].weight)
            if b.attn.ve_gate is not None:
                nn.init.uniform_(b.attn.ve_gate.weight, 0.0, 0.02)
        for i in range(L):
            self.resid_lambdas[i] = 1.15 - 0.10 * i / max(L - 1, 1)
            self.x0_lambdas[i] = 0.20 - 0.15 * i / max(L - 1, 1)
        if self.cfg["smear"]:
            nn.init.zeros_(self.smear_lambda)
            nn.init.uniform_(self.smear_gate.weight, 0.0, 0.02)
        if self.cfg["backout"]:
            nn.init.constant_(self.backout_lambda, 0.2)
        for ve in self.value_embeds.values():
            nn.init.uniform_(ve.weight, -s, s)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        cos, sin = self.cos[:, :T], self.sin[:, :T]
        pos = torch.arange(T)
        back = pos[:, None] - pos[None, :]  # (T, T): how far back key j is from query i
        masks = {w: (back >= 0) & (back <= w) for w in set(self.windows)}
        x = norm(self.transformer.wte(idx))
        if self.cfg["smear"]:
            gate = self.smear_lambda * torch.sigmoid(self.smear_gate(x[:, 1:, :24]))
            x = torch.cat([x[:, :1], x[:, 1:] + gate * x[:, :-1]], dim=1)
        x0, x_backout = x, None
        for i, block in enumerate(self.transformer.h):
            x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            x = block(x, ve, cos, sin, masks[self.windows[i]])
            if i == self.cfg["n_layer"] // 2:
                x_backout = x
        if self.cfg["backout"]:
            x = x - self.backout_lambda * x_backout
        logits = 15 * torch.tanh(self.lm_head(norm(x)) / 15)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                       ignore_index=-1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["check", "init", "bench"])
    p.add_argument("--config")
    p.add_argument("--cases", help="check: a JSON list of {config, weights, batch, out}, "
                   "checked in one process")
    p.add_argument("--weights")
    p.add_argument("--batch")
    p.add_argument("--out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.cases:
        with open(a.cases) as f:
            cases = json.load(f)
        for case in cases:
            run(argparse.Namespace(**{**vars(a), **case, "cases": None}))
        return
    if not a.config:
        p.error("--config (or, for check, --cases) is required")
    run(a)


def run(a):
    with open(a.config) as f:
        cfg = {"head_dim": 0, "window_pattern": "SSSL", "value_embeds": True, "smear": True,
               "backout": True, **json.load(f)}
    torch.manual_seed(a.seed)
    model = NanochatGPT(cfg)
    if a.mode == "init":
        model.init_weights()
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, a.out)
    elif a.mode == "check":
        model.load_state_dict(load_file(a.weights), strict=True)
        batch = load_file(a.batch)
        logits, loss = model(batch["idx"].long(), batch["targets"].long())
        loss.backward()
        out = {"logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
        for name, prm in model.named_parameters():
            out["grad." + name] = prm.grad.contiguous()
        save_file(out, a.out)
    else:
        model.init_weights()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        T = cfg["sequence_len"]
        data = torch.randint(0, cfg["vocab_size"], (a.steps + 2, a.batch_size, T + 1))
        for step in range(a.steps + 2):  # two warm-up steps
            if step == 2:
                start = time.perf_counter()
            _, loss = model(data[step, :, :-1], data[step, :, 1:])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - start
        print(f"ms_per_step: {1000 * seconds / a.steps:.1f}")
        print(f"tokens_per_s: {a.steps * a.batch_size * T / seconds:.1f}")


if __name__ == "__main__":
    main()
