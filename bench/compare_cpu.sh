#!/usr/bin/env bash
# Side-by-side CPU training throughput: lmtrain vs. the PyTorch-Python reference
# (bench/reference/train_gpt2.py), same model shape, batch, steps and thread count.
#
# The reference runs twice per round: eager PyTorch and torch.compile'd (--no_compile skips the
# latter). Runs alternate (lmtrain, eager, compiled, lmtrain, ...) so that slow drift in the
# machine (thermal, noisy neighbours) hits all sides alike. Prints every run's tokens/s, the
# median of each side, `ratio_compiled: R` (lmtrain / compiled) and last `ratio: R` = lmtrain
# median / eager reference median.
#
# Usage: bench/compare_cpu.sh [--preset small|gpt2-small-cpu] [--rounds R] [--steps N]
#                             [--warmup W] [--threads K]
# Env:   LMTRAIN_BIN  lmtrain binary (default: build/lmtrain under the repo root)
#        PYTHON       reference interpreter (default: .venv/bin/python, torch 2.11 from scripts/setup.sh)
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/compare_cpu.sh [--preset small|gpt2-small-cpu] [--rounds R] [--steps N]
                            [--warmup W] [--threads K] [--no_compile]

  --preset   gpt2-small-cpu (default): 6 layers, 384 wide, 6 heads, T=256, B=8, vocab 8192
             small:                    4 layers, 128 wide, 4 heads, T=64,  B=12, vocab 8192
  --rounds   alternating lmtrain/reference pairs (default 3)
  --steps    timed steps per run (default 20 for gpt2-small-cpu, 100 for small)
  --warmup   untimed steps per run (default 3 for gpt2-small-cpu, 10 for small)
  --threads  intra-op threads for both sides; also exported as OMP_NUM_THREADS (default 2)
  --no_compile  skip the torch.compile'd reference

Env: LMTRAIN_BIN (default build/lmtrain), PYTHON (default .venv/bin/python).
The last line printed is `ratio: R` (lmtrain median tokens/s / reference median tokens/s).
EOF
}

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Everything below uses paths relative to the repo root.
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

preset="gpt2-small-cpu"
rounds=3
steps=""
warmup=""
threads=2
compile=1

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
    --threads) [[ $# -ge 2 ]] || die "--threads needs a value"; threads="$2"; shift 2 ;;
    --threads=*) threads="${1#*=}"; shift ;;
    --no_compile) compile=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

case "$preset" in
  gpt2-small-cpu)
    config="configs/gpt2-small-cpu.yaml"
    n_layer=6; n_embd=384; n_head=6; seq_len=256; batch=8; vocab=8192
    default_steps=20; default_warmup=3
    ;;
  small)
    config="configs/bench-small.yaml"
    n_layer=4; n_embd=128; n_head=4; seq_len=64; batch=12; vocab=8192
    default_steps=100; default_warmup=10
    ;;
  *) die "unknown preset '$preset' (expected small or gpt2-small-cpu)" ;;
esac
steps="${steps:-$default_steps}"
warmup="${warmup:-$default_warmup}"

[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got '$rounds')"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer (got '$warmup')"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer (got '$threads')"

lmtrain_bin="${LMTRAIN_BIN:-build/lmtrain}"
python_bin="${PYTHON:-.venv/bin/python}"
reference="bench/reference/train_gpt2.py"

[[ -x "$lmtrain_bin" ]] ||
  die "lmtrain binary not found or not executable: '$lmtrain_bin' (build it first, e.g." \
      "cmake -S . -B build && cmake --build build, or set LMTRAIN_BIN)"
[[ -f "$config" ]] || die "config not found: $repo_root/$config"
[[ -x "$python_bin" ]] || die "python not found: '$python_bin' (set PYTHON)"
[[ -f "$reference" ]] || die "reference trainer not found: $repo_root/$reference"

export OMP_NUM_THREADS="$threads"

lmtrain_cmd=("$lmtrain_bin" bench --config "$config"
  "--model.vocab_size=$vocab" "--data.seq_len=$seq_len" "--train.micro_batch_size=$batch"
  "--train.threads=$threads" "--bench.steps=$steps" "--bench.warmup=$warmup")
reference_cmd=("$python_bin" "$reference"
  --n_layer "$n_layer" --n_head "$n_head" --n_embd "$n_embd" --vocab_size "$vocab"
  --block_size "$seq_len" --seq_len "$seq_len" --batch_size "$batch"
  --steps "$steps" --warmup "$warmup" --threads "$threads")

# run_one LABEL CMD... : runs CMD, prints its tokens/s, appends it to the global `result`.
# On failure or a missing `tokens_per_s:` line, shows the command's output and exits.
result=""
run_one() {
  local label="$1"
  shift
  local out status=0 tps
  out="$("$@" 2>&1)" || status=$?
  if (( status != 0 )); then
    printf '%s\n' "$out" >&2
    die "$label run failed (exit $status): $*"
  fi
  # Last `tokens_per_s: X` line wins (a log prefix before the key is tolerated).
  tps="$(field tokens_per_s <<<"$out")"
  if [[ -z "$tps" ]]; then
    printf '%s\n' "$out" >&2
    die "$label printed no 'tokens_per_s: X' line: $*"
  fi
  result="$tps"
}

echo "preset: $preset  (n_layer=$n_layer n_embd=$n_embd n_head=$n_head seq_len=$seq_len" \
  "batch=$batch vocab=$vocab)"
echo "steps: $steps timed + $warmup warmup  threads: $threads  rounds: $rounds" \
  "(OMP_NUM_THREADS=$OMP_NUM_THREADS OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset})"
echo "lmtrain:   ${lmtrain_cmd[*]}"
echo "reference: ${reference_cmd[*]}"
idle_check="$(busy_pct 2)"
if [[ -n "$idle_check" ]]; then
  echo "cpu busy before start (2 s sample, all cores): ${idle_check}%"
  if (( idle_check > 10 )); then
    echo "warning: the machine is not idle; figures will be noisy (ratio less so, runs alternate)"
  fi
fi

lm_results=()
ref_results=()
comp_results=()
for (( r = 1; r <= rounds; r++ )); do
  run_one lmtrain "${lmtrain_cmd[@]}"
  lm_results+=("$result")
  printf 'round %d  lmtrain    tokens_per_s: %s\n' "$r" "$result"
  run_one reference "${reference_cmd[@]}"
  ref_results+=("$result")
  printf 'round %d  reference  tokens_per_s: %s\n' "$r" "$result"
  if (( compile )); then
    run_one compiled "${reference_cmd[@]}" --compile
    comp_results+=("$result")
    printf 'round %d  compiled   tokens_per_s: %s\n' "$r" "$result"
  fi
done

lm_median="$(median "${lm_results[@]}")"
ref_median="$(median "${ref_results[@]}")"
echo "median lmtrain    tokens_per_s: $lm_median"
echo "median reference  tokens_per_s: $ref_median"
if (( compile )); then
  comp_median="$(median "${comp_results[@]}")"
  echo "median compiled   tokens_per_s: $comp_median"
  awk -v a="$lm_median" -v b="$comp_median" 'BEGIN { printf "ratio_compiled: %.3f\n", a / b }'
fi
awk -v a="$lm_median" -v b="$ref_median" \
  'BEGIN { if (b > 0) printf "ratio: %.3f\n", a / b; else { print "ratio: nan"; exit 1 } }'
