#!/usr/bin/env bash
# Data-parallel scaling on this machine, and lmtrain DDP against PyTorch-Python DDP (Gloo).
#
# Three runs per round, alternating so that drift hits all sides alike:
#   lmtrain 1 rank  x 1 thread   lmtrain bench
#   lmtrain 2 ranks x 1 thread   lmtrain launch --nproc_per_node=2 -- bench
#   PyTorch 2 ranks x 1 thread   torchrun --nproc_per_node=2 bench/reference/train_gpt2.py
# Each rank trains its own micro-batch of the same size, so the 2-rank runs do twice the work
# per step; every tokens/s figure is global. Prints every run, the medians, the unhidden
# communication time per step of lmtrain's 2-rank run, where each 2-rank step went (per rank:
# the step thread's CPU time against the same round's 1-rank run, the other threads' - Gloo's -
# CPU time, and the idle rest: waiting for the other rank or the network), and last two lines:
#   scaling: S   (lmtrain 2-rank / lmtrain 1-rank tokens/s; 2.0 = perfect)
#   ratio: R     (lmtrain 2-rank / PyTorch DDP 2-rank tokens/s)
#
# With --zero "1 2 3", each round also runs lmtrain's 2 ranks under those dist.zero stages, and
# the summary gives each stage's median, scaling and unhidden communication as a share of its step.
#
# With --grad_reduce_dtype bf16, both sides all-reduce the gradients in bf16: lmtrain with
# train.grad_reduce_dtype=bf16, PyTorch DDP with its bf16_compress_hook (half the bytes; the
# 1-rank run has nothing to reduce and is the same).
#
# Usage: bench/compare_ddp.sh [--preset gpt2-small-cpu|small] [--rounds R] [--steps N]
#                             [--warmup W] [--zero "STAGES"] [--grad_reduce_dtype fp32|bf16]
# Env:   LMTRAIN_BIN (default build/lmtrain), PYTHON (default .venv/bin/python),
#        TORCHRUN (default: torchrun beside $PYTHON)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

preset="gpt2-small-cpu"
rounds=3
steps=""
warmup=""
zero_stages=""
reduce_dtype="fp32"
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
    --zero) [[ $# -ge 2 ]] || die "--zero needs a value"; zero_stages="$2"; shift 2 ;;
    --zero=*) zero_stages="${1#*=}"; shift ;;
    --grad_reduce_dtype) [[ $# -ge 2 ]] || die "--grad_reduce_dtype needs a value"; reduce_dtype="$2"; shift 2 ;;
    --grad_reduce_dtype=*) reduce_dtype="${1#*=}"; shift ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$preset" in
  gpt2-small-cpu)
    config="configs/gpt2-small-cpu.yaml"
    n_layer=6; n_embd=384; n_head=6; seq_len=256; batch=8; vocab=8192
    default_steps=10; default_warmup=2 ;;
  small)
    config="configs/bench-small.yaml"
    n_layer=4; n_embd=128; n_head=4; seq_len=64; batch=12; vocab=8192
    default_steps=60; default_warmup=6 ;;
  *) die "unknown preset '$preset' (expected gpt2-small-cpu or small)" ;;
esac
steps="${steps:-$default_steps}"
warmup="${warmup:-$default_warmup}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got '$rounds')"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer (got '$warmup')"
[[ "$reduce_dtype" == fp32 || "$reduce_dtype" == bf16 ]] ||
  die "--grad_reduce_dtype takes fp32 or bf16 (got '$reduce_dtype')"
for z in $zero_stages; do
  [[ "$z" =~ ^[0-3]$ ]] || die "--zero takes stages 0 to 3 (got '$z')"
done

lmtrain_bin="${LMTRAIN_BIN:-build/lmtrain}"
python_bin="${PYTHON:-.venv/bin/python}"
torchrun_bin="${TORCHRUN:-$(dirname "$python_bin")/torchrun}"
[[ -x "$lmtrain_bin" ]] || die "lmtrain binary not found: '$lmtrain_bin' (build it, or set LMTRAIN_BIN)"
[[ -x "$python_bin" ]] || die "python not found: '$python_bin' (set PYTHON)"
[[ -x "$torchrun_bin" ]] || die "torchrun not found: '$torchrun_bin' (run scripts/setup.sh, or set TORCHRUN)"

export OMP_NUM_THREADS=1
bench_flags=(--config "$config" "--model.vocab_size=$vocab" "--data.seq_len=$seq_len"
  "--train.micro_batch_size=$batch" --train.total_batch_size=0 --train.threads=1
  --train.workers=1 "--bench.steps=$steps" "--bench.warmup=$warmup")
lm1_cmd=("$lmtrain_bin" bench "${bench_flags[@]}")
lm2_cmd=("$lmtrain_bin" launch --standalone --nproc_per_node=2 -- bench "${bench_flags[@]}"
  "--train.grad_reduce_dtype=$reduce_dtype")
ref2_cmd=("$torchrun_bin" --standalone --nproc_per_node=2
  bench/reference/train_gpt2.py
  --n_layer "$n_layer" --n_head "$n_head" --n_embd "$n_embd" --vocab_size "$vocab"
  --block_size "$seq_len" --seq_len "$seq_len" --batch_size "$batch"
  --steps "$steps" --warmup "$warmup" --threads 1 --grad_reduce_dtype "$reduce_dtype")

result=""
comm=""
step_ms=""
step_cpu=""
other_cpu=""
run_one() {
  local label="$1"
  shift
  local out status=0
  out="$("$@" 2>&1)" || status=$?
  if (( status != 0 )); then
    printf '%s\n' "$out" >&2
    die "$label run failed (exit $status): $*"
  fi
  result="$(field tokens_per_s <<<"$out")"
  comm="$(field comm_wait_ms <<<"$out")"
  sent="$(field comm_bytes_per_step <<<"$out")"
  step_ms="$(field ms_per_step <<<"$out")"
  step_cpu="$(field step_thread_cpu_ms <<<"$out")"
  other_cpu="$(field other_threads_cpu_ms <<<"$out")"
  [[ -n "$result" ]] || { printf '%s\n' "$out" >&2; die "$label printed no tokens_per_s"; }
}

# where LABEL: a 2-rank run's step split, per rank (the mean of the two): the step thread's CPU
# time, against this round's 1-rank run's (c1: the same work alone), the other threads' (Gloo's)
# and the rest of the step, when the rank's core had nothing to run (waiting for the other rank
# or for the network). Appends "compute_extra other idle" (ms) to where_LABEL.
declare -A where_parts
where() {
  local label="$1"
  [[ -n "$step_cpu" && -n "$other_cpu" && -n "$step_ms" ]] || return 0
  local line
  line="$(awk -v s="$step_ms" -v c="$step_cpu" -v o="$other_cpu" -v c1="$c1" 'BEGIN {
    idle = s - c - o; if (idle < 0) idle = 0
    printf "%.1f %.1f %.1f|step %.1f ms = compute %.1f (%+.1f%% over 1 rank alone) + other threads %.1f (%.2f%%) + idle %.1f (%.2f%%)",
      c - c1, o, idle, s, c, 100 * (c - c1) / c1, o, 100 * o / s, idle, 100 * idle / s }')"
  where_parts[$label]+="${line%%|*};"
  printf '          %s\n' "${line#*|}"
}

echo "preset: $preset (n_layer=$n_layer n_embd=$n_embd seq_len=$seq_len micro-batch per rank=$batch" \
  "vocab=$vocab), $steps timed + $warmup warmup steps, 1 thread per rank, $rounds rounds," \
  "gradients reduced in $reduce_dtype"
idle_check="$(busy_pct 2)"
if [[ -n "$idle_check" ]]; then
  echo "cpu busy before start (2 s sample, all cores): ${idle_check}%"
  if (( idle_check > 10 )); then echo "warning: the machine is not idle; figures will be noisy"; fi
fi
lm1=(); lm2=(); ref2=(); comms=()
declare -A zero_tps zero_comm
for (( r = 1; r <= rounds; r++ )); do
  run_one "lmtrain 1 rank" "${lm1_cmd[@]}"; lm1+=("$result"); c1="${step_cpu:-0}"
  printf 'round %d  lmtrain 1 rank    tokens_per_s: %s\n' "$r" "$result"
  run_one "lmtrain 2 ranks" "${lm2_cmd[@]}"; lm2+=("$result"); comms+=("${comm:-0}")
  printf 'round %d  lmtrain 2 ranks   tokens_per_s: %s  (comm not hidden: %s ms/step; sent %s bytes/step/rank)\n' \
    "$r" "$result" "${comm:-?}" "${sent:-?}"
  where ddp
  run_one "PyTorch DDP" "${ref2_cmd[@]}"; ref2+=("$result")
  printf 'round %d  PyTorch DDP 2     tokens_per_s: %s\n' "$r" "$result"
  for z in $zero_stages; do
    run_one "lmtrain 2 ranks ZeRO-$z" "${lm2_cmd[@]}" "--dist.zero=$z"
    zero_tps[$z]+="$result "; zero_comm[$z]+="${comm:-0} "
    printf 'round %d  lmtrain 2 ZeRO-%s   tokens_per_s: %s  (comm not hidden: %s ms/step; sent %s bytes/step/rank)\n' \
      "$r" "$z" "$result" "${comm:-?}" "${sent:-?}"
    where "zero$z"
  done
done
m1="$(median "${lm1[@]}")"; m2="$(median "${lm2[@]}")"; mr="$(median "${ref2[@]}")"
echo "median lmtrain 1 rank   tokens_per_s: $m1"
echo "median lmtrain 2 ranks  tokens_per_s: $m2"
echo "median PyTorch DDP 2    tokens_per_s: $mr"
echo "median lmtrain comm_wait_ms per step (all-reduce not hidden by backward): $(median "${comms[@]}")"
# Step time from the global tokens of a 2-rank step: 2 * batch * seq_len tokens.
step_tokens=$(( 2 * batch * seq_len ))
share() { awk -v c="$1" -v t="$2" -v n="$step_tokens" 'BEGIN { printf "%.2f", 100 * c / (1000 * n / t) }'; }
echo "lmtrain 2 ranks: comm not hidden is $(share "$(median "${comms[@]}")" "$m2")% of the step"
for z in $zero_stages; do
  read -ra zts <<<"${zero_tps[$z]}"; read -ra zcs <<<"${zero_comm[$z]}"
  zt="$(median "${zts[@]}")"; zc="$(median "${zcs[@]}")"
  awk -v a="$zt" -v b="$m1" -v z="$z" -v c="$zc" -v s="$(share "$zc" "$zt")" \
    'BEGIN { printf "ZeRO-%s 2 ranks: median tokens_per_s %s, scaling %.3f, comm not hidden %s ms (%s%% of the step)\n", z, a, a / b, c, s }'
done
# The medians of the step's parts over the rounds, as shares of 1 rank's compute (c1 medians).
parts() {
  local label="$1" name="$2" rows
  rows="${where_parts[$label]:-}"
  [[ -n "$rows" ]] || return 0
  local extra=() other=() idle=()
  IFS=';' read -ra items <<<"$rows"
  for it in "${items[@]}"; do
    read -r e o i <<<"$it"; extra+=("$e"); other+=("$o"); idle+=("$i")
  done
  echo "$name, per rank and step (medians): compute beyond 1 rank's $(median "${extra[@]}") ms," \
    "other threads $(median "${other[@]}") ms, idle $(median "${idle[@]}") ms"
}
parts ddp "lmtrain 2 ranks"
for z in $zero_stages; do parts "zero$z" "ZeRO-$z 2 ranks"; done
awk -v a="$m2" -v b="$m1" 'BEGIN { printf "scaling: %.3f\n", a / b }'
awk -v a="$m2" -v b="$mr" 'BEGIN { printf "ratio: %.3f\n", a / b }'
