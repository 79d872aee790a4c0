#!/usr/bin/env python3
"""CPU time that Gloo's collectives cost a rank, on this machine's loopback.

    torchrun --standalone --nproc_per_node=2 bench/gloo_cpu.py [--elements N] [--reps R]

Each rank times R calls of each collective over N fp32 elements (default: gpt2-small-cpu's
13,891,584 parameters, 55.6 MB) and rank 0 prints, per call, the wall time and the process's CPU
time (user + system, all threads: Gloo's work runs on its own threads). On a machine whose cores
all train, that CPU time comes out of the step: it is what bench/compare_ddp.sh's
other_threads_cpu_ms counts. Lines:
    all_reduce fp32 N          DDP's gradient all-reduce, in one call
    all_reduce bf16 N          the same in bf16 (train.grad_reduce_dtype=bf16)
    all_gather N/W per rank    c10d's Gloo allgather
    broadcasts N/W per rank    the same bytes as one broadcast per rank (lmtrain's allgather)
    all_to_all_single N        Gloo's all-to-all (lmtrain's reduce-scatter on Gloo)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=13891584)
    parser.add_argument("--reps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = args.elements // world * world

    def cpu_s():
        t = os.times()
        return t.user + t.system

    def bench(name, fn):
        fn()  # warm-up: Gloo's buffers and pairs
        dist.barrier()
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(args.reps):
            fn()
        dist.barrier()
        wall = (time.perf_counter() - t0) / args.reps * 1e3
        cpu = (cpu_s() - c0) / args.reps * 1e3
        if rank == 0:
            print(f"{name:28s} wall {wall:7.1f} ms   cpu {cpu:7.1f} ms per call (rank 0)",
                  flush=True)

    x = torch.randn(n)
    xb = x.to(torch.bfloat16)
    piece = x[: n // world].clone()
    gathered = torch.empty(n)
    outputs = list(gathered.chunk(world))
    if rank == 0:
        print(f"{world} ranks, {n} fp32 elements ({n * 4 / 1e6:.1f} MB), {args.reps} calls each")
    bench("all_reduce fp32 N", lambda: dist.all_reduce(x))
    bench("all_reduce bf16 N", lambda: dist.all_reduce(xb))
    bench("all_gather N/W per rank", lambda: dist.all_gather_into_tensor(gathered, piece))

    def broadcasts():
        outputs[rank].copy_(piece)
        works = [dist.broadcast(outputs[r], src=r, async_op=True) for r in range(world)]
        for w in works:
            w.wait()

    bench("broadcasts N/W per rank", broadcasts)
    bench("all_to_all_single N", lambda: dist.all_to_all_single(gathered, x))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
