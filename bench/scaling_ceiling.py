#!/usr/bin/env python3
"""How much of 2-rank data-parallel scaling this machine allows before any communication
(issue 43). In windows where nothing else runs, alternately:

  alone        one `lmtrain bench` of 1 rank x 1 thread;
  pinned alone the same, pinned to core 0 (taskset);
  pair         two independent such benches at once (no communication at all);
  pinned pair  the same, pinned to cores 0 and 1 (taskset);
  ddp          `lmtrain launch --nproc_per_node=2 -- bench` (DDP over Gloo), the same flags.

The two independent runs divided by one alone is the ceiling for the DDP scaling: what two
ranks get from the two cores when they never exchange a byte. Flags are compare_ddp.sh's
(gpt2-small-cpu, 8 x 256 tokens per rank, 10 timed + 2 warm-up steps).

A run counts only if, while it ran, processes other than its own used under 3% of the machine
(from /proc/stat, less the runs' own CPU from getrusage); others are printed as DISCARD and run
again. It waits (up to --deadline seconds in all) for the machine to be idle (< 3% busy over
3 s) before each run.

    bench/scaling_ceiling.py [--rounds N] [--deadline SECONDS]
    env: LMTRAIN_BIN (default build/lmtrain)

Prints one line per run (tokens/s of each process, CPU seconds, wall seconds) and ends with each
kind's median and its ratio to alone (pair: the ceiling; ddp: its scaling).
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="clean runs of each kind (default 3)")
    p.add_argument("--deadline", type=float, default=3600,
                   help="give up after this many seconds (default 3600)")
    a = p.parse_args()
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    return a


def busy_seconds():
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / hz, sum(v) / hz


def own_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tokens_per_s(out):
    m = re.findall(r"tokens_per_s:\s*([0-9.]+)", out)
    return float(m[-1]) if m else None


def wait_idle(deadline):
    while time.time() < deadline:
        b0, t0 = busy_seconds()
        time.sleep(3)
        b1, t1 = busy_seconds()
        if (b1 - b0) / max(t1 - t0, 1e-9) < 0.03:
            return True
    return False


def run(cmds, env):
    """Runs cmds at once; returns (tokens/s of each, others' share of the machine, cpu, wall)."""
    b0, _ = busy_seconds()
    c0, w0 = own_cpu(), time.time()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, cwd=REPO) for c in cmds]
    outs = [p.communicate()[0] for p in procs]
    b1, _ = busy_seconds()
    cpu, wall = own_cpu() - c0, time.time() - w0
    other = ((b1 - b0) - cpu) / (wall * os.cpu_count())
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"run failed (exit {p.returncode}): {' '.join(cmds[0])}\n{out}")
    return [tokens_per_s(o) for o in outs], other, cpu, wall


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if s else float("nan")


def main():
    a = parse_args()
    lmtrain = os.environ.get("LMTRAIN_BIN", os.path.join(REPO, "build", "lmtrain"))
    if not os.access(lmtrain, os.X_OK):
        sys.exit(f"lmtrain binary not found: '{lmtrain}' (build it, or set LMTRAIN_BIN)")
    if shutil.which("taskset") is None:
        sys.exit("taskset not found (util-linux)")
    if os.cpu_count() < 2:
        sys.exit("needs 2 cores")
    flags = ["--config", "configs/gpt2-small-cpu.yaml", "--model.vocab_size=8192",
             "--data.seq_len=256", "--train.micro_batch_size=8", "--train.total_batch_size=0",
             "--train.threads=1", "--train.workers=1", "--bench.steps=10", "--bench.warmup=2"]
    one = [lmtrain, "bench"] + flags
    kinds = [
        ("alone", [one]),
        ("pinned alone", [["taskset", "-c", "0"] + one]),
        ("pair", [one, one]),
        ("pinned pair", [["taskset", "-c", "0"] + one, ["taskset", "-c", "1"] + one]),
        ("ddp", [[lmtrain, "launch", "--standalone", "--nproc_per_node=2", "--", "bench"] + flags]),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    deadline = time.time() + a.deadline
    got = {k: [] for k, _ in kinds}
    print(f"{os.cpu_count()} cores; {a.rounds} clean runs of each kind", flush=True)
    while min(len(v) for v in got.values()) < a.rounds:
        for kind, cmds in kinds:
            if len(got[kind]) >= a.rounds:
                continue
            if not wait_idle(deadline):
                print("deadline reached before every run was clean", flush=True)
                break
            tps, other, cpu, wall = run(cmds, env)
            ok = other < 0.03 and None not in tps
            print(f"{time.strftime('%H:%M:%S')} {kind:12s} tokens_per_s {tps} "
                  f"cpu {cpu:.1f} s wall {wall:.1f} s others {100 * other:.1f}% "
                  f"{'ok' if ok else 'DISCARD'}", flush=True)
            if ok:
                got[kind].append(sum(tps))
        else:
            continue
        break
    alone = median(got["alone"])
    for kind, _ in kinds:
        m = median(got[kind])
        print(f"median {kind}: {m:.1f} tokens/s, {m / alone:.3f}x alone (n={len(got[kind])})")


if __name__ == "__main__":
    main()
