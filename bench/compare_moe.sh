#!/usr/bin/env bash
# MoE on the fortunes corpus, 2 ranks on this machine, side by side in one run: moe-tiny (8 SwiGLU
# experts of 128, top-2) data-parallel (ep=1: every rank holds every expert), moe-tiny expert-
# parallel (dist.ep=2: each rank holds 4 experts, tokens travel by all-to-all), and
# moe-tiny-dense (one SwiGLU MLP of 256: the same active parameters per token), for the same
# steps on the same global batches. Prints each run's median tokens/s, gradient-sync wait and
# all-to-all time per step, final validation loss, and the MoE layers' last load balance.
#
# Usage: bench/compare_moe.sh [--steps N] [--nproc N] [--rounds R]
# Env:   LMTRAIN_BIN (default build/lmtrain), DATA (default data/fortunes, prepared if missing)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=common.sh
source "$repo_root/bench/common.sh"
steps=300 nproc=2 rounds=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "compare_moe.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
data=${DATA:-data/fortunes}
ensure_fortunes "$bin" "$data"
out=$(mktemp -d /tmp/lmtrain_compare_moe.XXXXXX)
summary() {  # run dir, label
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
run, label = sys.argv[1], sys.argv[2]
steps = [json.loads(l) for l in open(run + "/metrics.jsonl")]
train = [r for r in steps if "loss" in r]
val = [r for r in steps if "val_loss" in r]
tps = statistics.median(r["tokens_per_s"] for r in train[1:])
comm = statistics.median(r.get("comm_wait_ms", 0) for r in train[1:])
a2a = statistics.median(r.get("a2a_ms", 0) for r in train[1:])
line = (f"{label:16s} tokens/s {tps:9.0f}  grad sync wait {comm:6.1f} ms/step  all-to-all {a2a:6.1f} ms/step"
        f"  val loss {val[-1]['val_loss']:.4f} at step {val[-1]['step']}")
if "moe" in train[-1]:
    cv = max(l["load_cv"] for l in train[-1]["moe"])
    line += f"  worst load cv {cv:.2f}"
print(line)
PY
}
for ((r = 0; r < rounds; ++r)); do
  for variant in moe-tiny:1 moe-tiny:$nproc moe-tiny-dense:1; do
    preset=${variant%%:*} ep=${variant##*:}
    label=$preset
    [[ $preset == moe-tiny ]] && label="$preset ep=$ep"
    run="$out/$preset.ep$ep.$r"
    "$bin" train --nproc_per_node="$nproc" --config "configs/$preset.yaml" --data.dir="$data" \
      --run.dir="$run" --train.max_steps="$steps" --train.eval_every="$steps" \
      --checkpoint.every=0 --log.every=10 --dist.ep="$ep" >"$run.log" 2>&1 ||
      { tail -20 "$run.log"; exit 1; }
    summary "$run" "$label"
  done
done
echo "runs in $out"
