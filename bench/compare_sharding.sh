#!/usr/bin/env bash
# ZeRO stages and tensor parallelism side by side (issue 42): `lmtrain launch --nproc_per_node=N
# -- bench` at dist.zero=0, 1, 2 and 3 (3 also with dist.reshard_after_forward=false) and at
# dist.tp=2 (pairs of ranks split every layer: N / 2 replicas, so half the global batch of the
# others); at N = 4 also HSDP (ZeRO-3 within pairs, replicated across) and TP=2 x ZeRO-3. The
# same model and per-rank batch, alternating within each round so that drift hits all
# alike. tokens/s is global; under TP the communication not hidden is every TP collective.
# Per stage: median tokens/s (global), rank 0's model-state bytes (parameters + gradients +
# optimizer state, from the bench's byte accounting), its ratio to ZeRO-0's, rank 0's peak RSS,
# the communication not hidden per step, and under ZeRO-3 the gathered blocks' peak.
#
# Usage: bench/compare_sharding.sh [--preset gpt2-small-cpu|small] [--rounds R] [--steps N]
#                                  [--warmup W] [--nproc 2|4]
# Env:   LMTRAIN_BIN (default build/lmtrain)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

preset="gpt2-small-cpu"
rounds=3
steps=""
warmup=""
nproc=2
while (( $# > 0 )); do
  case "$1" in
    --preset) [[ $# -ge 2 ]] || die "--preset needs a value"; preset="$2"; shift 2 ;;
    --preset=*) preset="${1#*=}"; shift ;;
    --rounds) [[ $# -ge 2 ]] || die "--rounds needs a value"; rounds="$2"; shift 2 ;;
    --rounds=*) rounds="${1#*=}"; shift ;;
    --steps) [[ $# -ge 2 ]] || die "--steps needs a value"; steps="$2"; shift 2 ;;
    --steps=*) steps="${1#*=}"; shift ;;
    --warmup) [[ $# -ge 2 ]] || die "--warmup needs a value"; warmup="$2"; shift 2 ;;
    --warmup=*) warmup="${1#*=}"; shift ;;
    --nproc) [[ $# -ge 2 ]] || die "--nproc needs a value"; nproc="$2"; shift 2 ;;
    --nproc=*) nproc="${1#*=}"; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$preset" in
  gpt2-small-cpu)
    config="configs/gpt2-small-cpu.yaml"; seq_len=256; batch=8; vocab=8192
    default_steps=10; default_warmup=2 ;;
  small)
    config="configs/bench-small.yaml"; seq_len=64; batch=12; vocab=8192
    default_steps=60; default_warmup=6 ;;
  *) die "unknown preset '$preset' (expected gpt2-small-cpu or small)" ;;
esac
steps="${steps:-$default_steps}"
warmup="${warmup:-$default_warmup}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got '$rounds')"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer (got '$warmup')"
[[ "$nproc" == 2 || "$nproc" == 4 ]] || die "--nproc must be 2 or 4 (got '$nproc')"

lmtrain_bin="${LMTRAIN_BIN:-build/lmtrain}"
[[ -x "$lmtrain_bin" ]] || die "lmtrain binary not found: '$lmtrain_bin' (build it, or set LMTRAIN_BIN)"

export OMP_NUM_THREADS=1
bench_flags=(--config "$config" "--model.vocab_size=$vocab" "--data.seq_len=$seq_len"
  "--train.micro_batch_size=$batch" --train.total_batch_size=0 --train.threads=1
  --train.workers=1 "--bench.steps=$steps" "--bench.warmup=$warmup")
labels=("zero0" "zero1" "zero2" "zero3" "zero3-keep" "tp2")
stage_flags=("--dist.zero=0" "--dist.zero=1" "--dist.zero=2" "--dist.zero=3"
  "--dist.zero=3 --dist.reshard_after_forward=false" "--dist.tp=2")
if (( nproc == 4 )); then
  labels+=("hsdp2x2" "tp2-zero3")
  stage_flags+=("--dist.zero=3 --dist.shard_group_size=2" "--dist.tp=2 --dist.zero=3")
fi

echo "preset: $preset (seq_len=$seq_len micro-batch per rank=$batch vocab=$vocab), $nproc ranks x 1" \
  "thread, $steps timed + $warmup warmup steps, $rounds rounds"
idle_check="$(busy_pct 2)"
if [[ -n "$idle_check" ]]; then
  echo "cpu busy before start (2 s sample, all cores): ${idle_check}%"
  if (( idle_check > 10 )); then echo "warning: the machine is not idle; figures will be noisy"; fi
fi
declare -A tps state rss comm gathered sent
for (( r = 1; r <= rounds; r++ )); do
  for i in "${!labels[@]}"; do
    label="${labels[$i]}"
    # shellcheck disable=SC2206
    extra=(${stage_flags[$i]})
    status=0
    out="$("$lmtrain_bin" launch --standalone "--nproc_per_node=$nproc" -- bench "${bench_flags[@]}" \
      "${extra[@]}" 2>&1)" || status=$?
    if (( status != 0 )); then
      printf '%s\n' "$out" >&2
      die "$label run failed (exit $status)"
    fi
    t="$(field tokens_per_s <<<"$out")"
    [[ -n "$t" ]] || { printf '%s\n' "$out" >&2; die "$label printed no tokens_per_s"; }
    tps[$label]="${tps[$label]:-} $t"
    state[$label]="$(field model_state_bytes_per_rank <<<"$out")"
    rss[$label]="${rss[$label]:-} $(field peak_rss_mib <<<"$out")"
    comm[$label]="${comm[$label]:-} $(field comm_wait_ms <<<"$out")"
    gathered[$label]="$(field gathered_peak_bytes <<<"$out")"
    sent[$label]="$(field comm_bytes_per_step <<<"$out")"
    printf 'round %d  %-10s tokens_per_s: %s\n' "$r" "$label" "$t"
  done
done
base_state="${state[zero0]}"
base_tps="$(median ${tps[zero0]})"
printf '%-10s %12s %8s %16s %8s %13s %11s %18s %16s\n' stage tokens_per_s vs_zero0 \
  model_state_bytes vs_zero0 peak_rss_mib comm_wait_ms gathered_peak_bytes sent_bytes_step
for label in "${labels[@]}"; do
  # shellcheck disable=SC2086
  m="$(median ${tps[$label]})"
  awk -v l="$label" -v m="$m" -v bt="$base_tps" -v s="${state[$label]}" -v bs="$base_state" \
    -v rss="$(median ${rss[$label]})" -v c="$(median ${comm[$label]})" -v g="${gathered[$label]}" \
    -v b="${sent[$label]:-0}" \
    'BEGIN { printf "%-10s %12.1f %8.3f %16d %8.3f %13.1f %11.2f %18d %16d\n",
             l, m, m / bt, s, s / bs, rss, c, g, b }'
done
