#!/usr/bin/env bash
# Distillation cost on the fortunes corpus, one rank, side by side in one run: the same student
# (gpt2-tiny, width 128) trained plainly, distilled from an online teacher (width 256, trained
# briefly first: its weights do not change the cost) with the chunked loss and with full
# logits, and distilled from the offline cache of that teacher's top-k (`lmtrain
# distill-cache`). Prints each run's median tokens/s and ms/step, peak RSS, and the last
# validation loss; and the cache's size and the time it took to write.
#
# Usage: bench/compare_distill.sh [--steps N] [--micro_batch B] [--top_k K]
# Env:   LMTRAIN_BIN (default build/lmtrain), DATA (default data/fortunes, prepared if missing)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=common.sh
source "$repo_root/bench/common.sh"
steps=60 micro=16 top_k=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --micro_batch) micro=$2; shift 2 ;;
    --top_k) top_k=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compare_distill.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
data=${DATA:-data/fortunes}
ensure_fortunes "$bin" "$data"
out=$(mktemp -d /tmp/lmtrain_compare_distill.XXXXXX)
common=(--config configs/gpt2-tiny.yaml --data.dir="$data" --train.micro_batch_size="$micro"
  --train.total_batch_size=$((micro * 128)) --train.eval_every=0 --train.eval_batches=20
  --checkpoint.every=0 --log.every=5 --train.threads=2)
summary() {  # run dir, label, peak RSS KiB
  python3 - "$1" "$2" "$3" <<'PY'
import json, statistics, sys
run, label, rss = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
train = [r for r in recs if "loss" in r]
val = [r for r in recs if "val_loss" in r]
tps = statistics.median(r["tokens_per_s"] for r in train[1:])
print(f"{label:28s} tokens/s {tps:8.0f}  peak RSS {rss / 1024:7.1f} MiB  "
      f"val loss {val[-1]['val_loss']:.4f}")
PY
}
timed() {  # label, run dir, lmtrain args...
  local label=$1 run=$2
  shift 2
  /usr/bin/time -f "%M" -o "$run.rss" "$bin" "$@" --run.dir="$run" >"$run.log" 2>&1 ||
    { tail -20 "$run.log"; exit 1; }
  summary "$run" "$label" "$(tail -1 "$run.rss")"
}
echo "== teacher: width 256, 20 steps ($out/teacher)"
"$bin" train "${common[@]}" --run.dir="$out/teacher" --model.n_embd=256 --train.max_steps=20 \
  >"$out/teacher.log" 2>&1 || { tail -20 "$out/teacher.log"; exit 1; }
echo "== distill-cache: top-$top_k of every training window"
start=$(date +%s.%N)
"$bin" distill-cache "${common[@]}" --distill.teacher="$out/teacher" --top_k "$top_k" \
  --output "$out/cache.bin" >"$out/cache.log" 2>&1 || { tail -20 "$out/cache.log"; exit 1; }
end=$(date +%s.%N)
python3 -c "import os,sys; print(f'cache: {os.path.getsize(sys.argv[1])/2**20:.1f} MiB written in {float(sys.argv[3])-float(sys.argv[2]):.1f} s')" \
  "$out/cache.bin" "$start" "$end"
echo "== students: width 128, $steps steps of $((micro * 128)) tokens"
kd=(--distill.enabled=true --train.max_steps="$steps")
timed "plain (no teacher)" "$out/plain" train "${common[@]}" --train.max_steps="$steps"
timed "online, chunked (512)" "$out/online" train "${common[@]}" "${kd[@]}" \
  --distill.teacher="$out/teacher"
timed "online, full logits" "$out/full" train "${common[@]}" "${kd[@]}" \
  --distill.teacher="$out/teacher" --distill.chunk_tokens=0
timed "offline cache (top-$top_k)" "$out/offline" train "${common[@]}" "${kd[@]}" \
  --distill.cache="$out/cache.bin"
echo "runs in $out"
