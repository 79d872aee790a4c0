"""GPU time per step by what launched it, from a Kineto trace (LMTRAIN_PROFILE=FILE of
`lmtrain bench`, or bench/reference/train_gpt2.py --profile FILE; plain or .gz):

    python3 bench/trace_owners.py TRACE [--steps N] [--top K]

Each GPU kernel, memset and copy is traced back, by its correlation id, to the CUDA runtime call
that launched it and the CPU operations open around that call. It is then grouped by its owner,
the autograd node it ran for ("bwd AddmmBackward0") or the outermost forward operation ("fwd
aten::gelu"), by the innermost operation ("aten::sum") and by the kernel's short name. One row
per group: milliseconds and launches per step (the trace's totals divided by --steps, the
profiled steps, default 3), largest first. Kernels launched outside any recorded operation (the
autograd engine's GEMMs, custom kernels) show as "fwd ?". Used for bench/README.md's "Where the
GPU time goes"."""
import argparse
import bisect
import collections
import gzip
import json
import re
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"trace_owners: cannot read {path}: {e}")
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        sys.exit(f"trace_owners: {path} has no traceEvents list (not a Kineto trace)")
    return events


def short_kernel_name(name):
    if "nvjet" in name or "gemm" in name.lower() or "cutlass" in name:
        return "GEMM"
    if "sdpa" in name or "flash" in name or "fmha" in name:
        return "attention"
    m = re.search(r"lmtrain::kernels::(?:\(anonymous namespace\)::)?(\w+)", name)
    if m:
        return m.group(1)
    m = re.search(r"at::native::(?:\(anonymous namespace\)::)?([A-Za-z_]+)", name)
    return m.group(1) if m else name[:40]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--steps", type=float, default=3, help="profiled steps in the trace")
    p.add_argument("--top", type=int, default=30, help="rows to print")
    args = p.parse_args()
    events = load(args.trace)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ops = collections.defaultdict(list)  # thread -> CPU ops sorted by start
    for e in events:
        if e.get("cat") == "cpu_op":
            ops[e["tid"]].append(e)
    for v in ops.values():
        v.sort(key=lambda o: o["ts"])
    starts = {tid: [o["ts"] for o in v] for tid, v in ops.items()}

    def open_ops(tid, ts):  # the CPU ops open at ts on thread tid, outermost first
        v = ops.get(tid, [])
        i = bisect.bisect_right(starts.get(tid, []), ts)
        s = [o for o in v[max(0, i - 400):i] if o["ts"] <= ts <= o["ts"] + o["dur"]]
        s.sort(key=lambda o: (o["ts"], -o["dur"]))
        return [o["name"] for o in s]

    time, count = collections.Counter(), collections.Counter()
    for k in events:
        if k.get("cat") not in ("kernel", "gpu_memset", "gpu_memcpy"):
            continue
        launch = launches.get(k.get("args", {}).get("correlation"))
        stack = open_ops(launch["tid"], launch["ts"]) if launch else []
        node = next((s for s in stack if s.startswith("autograd::engine::evaluate_function")), None)
        owner = ("bwd " + node.split(": ", 1)[-1]) if node else "fwd " + (stack[0] if stack else "?")
        owner = re.sub(r"torch::autograd::CppNode<lmtrain::\w+::\(anonymous namespace\)::(\w+)>",
                       r"\1", owner)
        key = (owner, stack[-1] if stack else "?", short_kernel_name(k.get("name", "")))
        time[key] += k.get("dur", 0)
        count[key] += 1
    total = sum(time.values())
    print(f"GPU busy {total / args.steps / 1000:.2f} ms per step ({args.steps:g} steps)")
    for key, us in time.most_common(args.top):
        print(f"{us / args.steps / 1000:7.3f} ms {count[key] / args.steps:6.1f}x  "
              f"{key[0][:56]:56s} | {key[1][:26]:26s} | {key[2][:40]}")


if __name__ == "__main__":
    main()
