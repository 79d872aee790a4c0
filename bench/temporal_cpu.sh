#!/usr/bin/env bash
# Temporal-encoder training speed on the CPU (issue 26), 1 rank against 2 ranks on the same
# global batch, side by side in one run. Prepares the tiny setup the e2e tests use
# (tests/e2e/temporal_fixture.h): `lmtrain temporal-data` samples (lengths 48 and 64; trend,
# seasonality, spikes), a tiny LM (2 layers, width 32) trained briefly on their text, then
# aligns an encoder (1 layer, width 32, patches of 16, rows of 96 tokens) to it, frozen, with
#   lmtrain train ...                                     1 rank,  micro-batch G,   THREADS threads
#   lmtrain train ...                                     1 rank,  micro-batch G,   1 thread
#   lmtrain launch --nproc_per_node=2 -- train ...        2 ranks, micro-batch G/2, 1 thread each
# in alternating rounds, and prints each run's median samples/s (metrics.jsonl's samples_per_s,
# global, the first --skip logged steps left out) and the 2-rank / 1-rank ratios.
#
# Usage: bench/temporal_cpu.sh [--global_batch G] [--steps N] [--skip K] [--rounds R]
#                              [--threads T] [--samples N]
# Env:   LMTRAIN_BIN (default build/lmtrain); KEEP=1 keeps the runs' directory.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=common.sh
source "$repo_root/bench/common.sh"
global=16 steps=30 skip=5 rounds=3 threads=2 samples=960
while [[ $# -gt 0 ]]; do
  case "$1" in
    --global_batch) global=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "temporal_cpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
(( global % 2 == 0 )) || die "--global_batch must be even (2 ranks share it)"
(( steps > skip )) || die "--steps must be more than --skip"
bin=${LMTRAIN_BIN:-build/lmtrain}
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (build it, or set LMTRAIN_BIN)"
out=$(mktemp -d /tmp/lmtrain_temporal_cpu.XXXXXX)
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$out"' EXIT

run_or_die() {  # log file, command...
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -20 "$log" >&2; die "failed: $*"; }
}

echo "== setup: $samples samples, a tiny LM ($out)"
run_or_die "$out/td.log" "$bin" temporal-data --num_samples "$samples" --output_dir "$out/td" \
  --seed 5 --length 48 --length 64 --tasks trend --tasks seasonality --tasks spikes --lm_text
# The LM's corpus: each sample's text (`--lm_text`: its statistics and attributes in words, the
# question, the answer).
run_or_die "$out/prepare.log" "$bin" prepare --input "$out/td/lm_text.jsonl" \
  --output "$out/lm_data" --vocab_size 320
run_or_die "$out/lm.log" "$bin" train --config configs/gpt2-tiny.yaml --model.n_layer=2 \
  --model.n_head=2 --model.n_embd=32 --model.block_size=128 --data.seq_len=64 \
  --train.micro_batch_size=8 --train.total_batch_size=512 --train.max_steps=10 \
  --train.threads=1 --train.eval_every=0 --checkpoint.every=0 --data.dir="$out/lm_data" \
  --run.dir="$out/lm"

flags=(--model.temporal.enabled=true --model.init_from="$out/lm/checkpoints/latest"
  --data.temporal.dir="$out/td" --model.temporal.max_length=64 --model.temporal.patch_len=16
  --model.temporal.stride=16 --model.temporal.layers=1 --model.temporal.width=32
  --model.temporal.heads=2 --data.seq_len=96 --train.total_batch_size=$((global * 96))
  --optim.lr=3e-3 --optim.warmup_steps=2 --log.every=1 --train.eval_every=0
  --train.eval_batches=1 --checkpoint.every=0 --train.max_steps="$steps")

median_samples_per_s() {  # run dir
  python3 - "$1" "$skip" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
v = [r["samples_per_s"] for r in recs if "samples_per_s" in r][int(sys.argv[2]):]
print(f"{statistics.median(v):.1f}")
PY
}

busy=$(busy_pct 2)
echo "cpu busy before start (2 s sample): ${busy:-?}%"
[[ -n "$busy" && "$busy" -gt 10 ]] &&
  echo "warning: the machine is ${busy}% busy: figures will be low and noisy"
echo "== $steps steps of $global samples (rows of 96 tokens), median of steps $((skip + 1))..$steps"
declare -a one_t one_1 two_1
for ((r = 1; r <= rounds; ++r)); do
  run_or_die "$out/one_t_$r.log" env OMP_NUM_THREADS="$threads" "$bin" train "${flags[@]}" \
    --train.micro_batch_size="$global" --train.threads="$threads" --run.dir="$out/one_t_$r"
  one_t+=("$(median_samples_per_s "$out/one_t_$r")")
  run_or_die "$out/one_1_$r.log" env OMP_NUM_THREADS=1 "$bin" train "${flags[@]}" \
    --train.micro_batch_size="$global" --train.threads=1 --run.dir="$out/one_1_$r"
  one_1+=("$(median_samples_per_s "$out/one_1_$r")")
  run_or_die "$out/two_1_$r.log" env OMP_NUM_THREADS=1 "$bin" launch --standalone \
    --nproc_per_node=2 -- train "${flags[@]}" --train.micro_batch_size=$((global / 2)) \
    --train.threads=1 --run.dir="$out/two_1_$r"
  two_1+=("$(median_samples_per_s "$out/two_1_$r")")
  printf 'round %d  samples/s: 1 rank x %d threads %8s   1 rank x 1 thread %8s   2 ranks x 1 thread %8s\n' \
    "$r" "$threads" "${one_t[-1]}" "${one_1[-1]}" "${two_1[-1]}"
done
m_t=$(median "${one_t[@]}") m_1=$(median "${one_1[@]}") m_2=$(median "${two_1[@]}")
echo "median samples/s:"
printf '%-32s %10s\n' "1 rank x $threads threads" "$m_t" "1 rank x 1 thread" "$m_1" \
  "2 ranks x 1 thread" "$m_2"
python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); print(f'scaling (2 ranks x 1 / 1 rank x 1): {c / b:.2f}'); print(f'2 ranks x 1 / 1 rank x ${threads}: {c / a:.2f}')" \
  "$m_t" "$m_1" "$m_2"
