#!/usr/bin/env python3
"""Hugging Face transformers training-speed reference for the Qwen3 shapes (issue 29).

Builds Qwen3ForCausalLM (dense) or Qwen3MoeForCausalLM from a config with random weights and
trains it the way a transformers user would on one GPU: fp32 master weights under bf16
autocast, SDPA attention, fused AdamW, TF32, optionally torch.compile. Random tokens from a
fixed seed, generated before timing. The same shapes as lmtrain's configs/qwen3-0.6b.yaml and
configs/qwen3-moe-bench.yaml (bench/compare_gpu_hf.sh runs both side by side).

The last lines printed are always:

    ms_per_step: X
    tokens_per_s: Y
    peak_mem_mib: Z      (CUDA only)

Run with the venv's interpreter: .venv/bin/python bench/reference/train_hf.py --model qwen3-0.6b
"""
import argparse
import time

import torch

SHAPES = {
    # Qwen/Qwen3-0.6B
    "qwen3-0.6b": dict(kind="dense", layers=28, hidden=1024, heads=16, kv_heads=8, head_dim=128,
                       intermediate=3072, vocab=151936, tie=True),
    # issue 29's MoE target: 64 experts top-8, 12 layers, width 1024
    "qwen3-moe-bench": dict(kind="moe", layers=12, hidden=1024, heads=16, kv_heads=4, head_dim=64,
                            intermediate=3072, experts=64, top_k=8, expert_hidden=512,
                            vocab=151936, tie=False),
    # CPU smoke shapes (the script's own check, and bench/compare_gpu_hf.sh --tiny)
    "tiny": dict(kind="dense", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                 intermediate=128, vocab=512, tie=True),
    "tiny-moe": dict(kind="moe", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                     intermediate=128, experts=8, top_k=2, expert_hidden=32, vocab=512,
                     tie=False),
}


def build(shape, seq_len):
    import transformers

    common = dict(vocab_size=shape["vocab"], hidden_size=shape["hidden"],
                  num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                  num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"],
                  intermediate_size=shape["intermediate"], max_position_embeddings=seq_len,
                  rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=shape["tie"],
                  attention_dropout=0.0)
    if shape["kind"] == "moe":
        cfg = transformers.Qwen3MoeConfig(num_experts=shape["experts"],
                                          num_experts_per_tok=shape["top_k"],
                                          moe_intermediate_size=shape["expert_hidden"],
                                          decoder_sparse_step=1, norm_topk_prob=True,
                                          output_router_logits=True, router_aux_loss_coef=0.001,
                                          **common)
        cls = transformers.Qwen3MoeForCausalLM
    else:
        cfg = transformers.Qwen3Config(**common)
        cls = transformers.Qwen3ForCausalLM
    cfg._attn_implementation = "sdpa"
    return cls(cfg)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen3-0.6b", choices=sorted(SHAPES))
    p.add_argument("--seq_len", type=int, default=2048)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before timing")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--seed", type=int, default=1337)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    shape = SHAPES[args.model]
    model = build(shape, args.seq_len).to(dev)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=cuda)
    step_model = torch.compile(model) if args.compile else model
    gen = torch.Generator().manual_seed(args.seed)
    batches = [torch.randint(shape["vocab"], (args.batch_size, args.seq_len + 1), generator=gen)
               for _ in range(4)]
    batches = [b.to(dev) for b in batches]

    def step(i):
        b = batches[i % len(batches)]
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            out = step_model(input_ids=b[:, :-1], labels=b[:, 1:].contiguous(),
                             use_cache=False)
            loss = out.loss  # includes the router's aux loss for the MoE model
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(args.warmup):
        step(i)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    final = loss.item()
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    tokens = args.batch_size * args.seq_len * args.steps
    print(f"model: {args.model} ({shape['kind']}, {n_params / 1e6:.1f}M parameters), "
          f"batch {args.batch_size} x {args.seq_len}, bf16 autocast, "
          f"{'compiled' if args.compile else 'eager'}, torch {torch.__version__}")
    print(f"final_loss: {final:.4f}")
    print(f"ms_per_step: {1000 * dt / args.steps:.2f}")
    print(f"tokens_per_s: {tokens / dt:.1f}")
    if cuda:
        print(f"peak_mem_mib: {torch.cuda.max_memory_allocated() / 2**20:.0f}")


if __name__ == "__main__":
    main()
