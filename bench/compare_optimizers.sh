#!/usr/bin/env bash
# Sharded optimizers on this machine, 2 ranks x 1 thread:
#   1. throughput, optimizer state and peak RSS per rank for ZeRO-0/1/2 AdamW and Muon on
#      gpt2-small-cpu (lmtrain bench, random tokens);
#   2. validation loss after the same token budget, AdamW vs Muon, gpt2-tiny on the default
#      corpus (the demo's prepared fortunes; run scripts/demo.sh once first).
# Usage: bench/compare_optimizers.sh [--steps N (bench, default 5)] [--train_steps N (600)]
# Env:   LMTRAIN_BIN (default build/lmtrain), DATA (default data/prepared/fortunes)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=5
train_steps=600
while (( $# > 0 )); do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --train_steps) train_steps="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_optimizers.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
bin="${LMTRAIN_BIN:-build/lmtrain}"
data="${DATA:-data/prepared/fortunes}"
[[ -x "$bin" ]] || { echo "compare_optimizers.sh: build lmtrain first ($bin)" >&2; exit 1; }

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

echo "== gpt2-small-cpu, 2 ranks x 1 thread, micro-batch 8 per rank, $steps timed steps"
printf '%-8s %12s %16s %14s %14s\n' optimizer tokens/s state_MiB/rank peak_RSS_MiB comm_wait_ms
for variant in "adamw --dist.zero=0" "adamw --dist.zero=1" "adamw --dist.zero=2" "muon --dist.zero=0"; do
  set -- $variant
  out="$("$bin" launch --standalone --nproc_per_node=2 -- bench --config configs/gpt2-small-cpu.yaml \
    --model.vocab_size=8192 --train.total_batch_size=0 --train.threads=1 --train.workers=1 \
    --bench.steps="$steps" --bench.warmup=1 --optim.name="$1" "$2" 2>&1)"
  name="$1${2#--dist.zero=}"
  [[ "$1" == muon ]] && name=muon
  [[ "$1" == adamw ]] && name="zero${2#--dist.zero=}"
  printf '%-8s %12s %16.1f %14s %14s\n' "$name" "$(field tokens_per_s <<<"$out")" \
    "$(awk -v b="$(field optimizer_state_bytes_per_rank <<<"$out")" 'BEGIN{print b/1048576}')" \
    "$(field peak_rss_mib <<<"$out")" "$(field comm_wait_ms <<<"$out")"
done

echo "== val loss after $train_steps steps x 2048 tokens, gpt2-tiny on $data, 2 ranks"
[[ -f "$data/prepare.json" ]] || { echo "no $data: run scripts/demo.sh first" >&2; exit 1; }
for opt in adamw muon; do
  run="runs/compare_optimizers_$opt"
  rm -rf "$run"
  "$bin" launch --standalone --nproc_per_node=2 -- train --config configs/gpt2-tiny.yaml \
    --data.dir="$data" --run.dir="$run" --max_steps="$train_steps" --train.eval_every=0 \
    --checkpoint.every=0 --log.every=100 --optim.name="$opt" >/dev/null 2>&1
  val="$(grep val_loss "$run/metrics.jsonl" | tail -n 1 | sed 's/.*"val_loss":\([0-9.]*\).*/\1/')"
  echo "$opt val_loss: $val"
done
