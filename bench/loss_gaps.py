"""Loss curves of runs side by side: bench/loss_gaps.py OUT BASE OTHER... compares each OTHER's
OUT/run_OTHER/metrics.jsonl with BASE's (then each with the one before it: fp32 -> bf16 -> fp8),
printing the largest train-loss gap over the logged steps, the final train losses and their
relative difference, and the last validation losses (issue 39's FP8 target: final loss within 1%
of bf16's over 200 steps). Used by scripts/device_check.sh and scripts/device_first.sh."""
import json
import sys


def curve(out, name):
    path = f"{out}/run_{name}/metrics.jsonl"
    try:
        rows = [json.loads(line) for line in open(path)]
    except OSError as e:
        sys.exit(f"loss_gaps: cannot read {path}: {e.strerror}")
    train = {r["step"]: r["loss"] for r in rows if "loss" in r}
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    if not train:
        sys.exit(f"loss_gaps: {path} has no train loss rows")
    return train, val


def compare(out, x, y):
    a, va = curve(out, x)
    b, vb = curve(out, y)
    shared = [s for s in a if s in b]
    gap = max(abs(a[s] - b[s]) for s in shared) if shared else float("nan")
    fa, fb = a[max(a)], b[max(b)]
    val = f"; val {va[-1]:.4f} vs {vb[-1]:.4f}" if va and vb else ""
    print(f"{y} vs {x}: max |train loss gap| over {len(shared)} logged steps {gap:.4f}; "
          f"final train {fa:.4f} ({x}) vs {fb:.4f} ({y}), {100 * (fb / fa - 1):+.2f}%{val}")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, names = sys.argv[1], sys.argv[2:]
    for x, y in zip(names, names[1:]):
        compare(out, x, y)
