#!/usr/bin/env bash
# `lmtrain plan`'s bytes per rank and bytes sent per step for Llama-3-8B, Qwen3-30B-A3B and the
# ZeRO paper's 7.5B model at 8, 64 and 512 ranks under each layout, as the Markdown tables of
# bench/README.md. Host only: nothing is trained or allocated (the models are built with
# unwritten weights); a few seconds per plan.
# Each cell: model state (parameters + gradients + Adam moments) / peak (+ ZeRO-3's gathered
# units + one sequence's activations, bf16 with FlashAttention: --train.device=cuda) / bytes
# sent per step, in GiB per rank; the peak is starred when it fits --memory GiB. "—": the
# layout does not exist at that size or the trainer refuses it.
#
# Usage: bench/plan_tables.sh [--memory GIB]     (default 80: an H100)
# Env:   LMTRAIN_BIN (default build/lmtrain)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

memory=80
while (( $# > 0 )); do
  case "$1" in
    --memory) [[ $# -ge 2 ]] || die "--memory needs a value"; memory="$2"; shift 2 ;;
    --memory=*) memory="${1#*=}"; shift ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
lmtrain_bin="${LMTRAIN_BIN:-build/lmtrain}"
[[ -x "$lmtrain_bin" ]] || die "lmtrain binary not found: '$lmtrain_bin' (build it, or set LMTRAIN_BIN)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sizes=(8 64 512)

# table NAME CONFIG "LABEL=ROW-PREFIX" ...: one Markdown table over the sizes.
table() {
  local name="$1" config="$2"
  shift 2
  local common=(--config "$config" --train.device=cuda --train.precision=bf16
    --train.micro_batch_size=1 --train.total_batch_size=0 "--device_memory=$memory")
  for n in "${sizes[@]}"; do
    "$lmtrain_bin" plan "${common[@]}" --nproc "$n" > "$work/$name.$n"
  done
  echo "$name ($(field trained_parameters < "$work/$name.8") parameters, $config):"
  echo
  echo "| layout | 8 ranks | 64 ranks | 512 ranks |"
  echo "|---|---|---|---|"
  for spec in "$@"; do
    local label="${spec%%=*}" prefix="${spec#*=}"
    local line="| $label |"
    for n in "${sizes[@]}"; do
      local row
      row="$(grep -m1 -F "| $prefix" "$work/$name.$n" || true)"
      if [[ -z "$row" ]]; then line+=" — |"; continue; fi
      line+="$(awk -F'|' '{ gsub(/ /, ""); state = $3 + $4 + $5
        printf " %.1f / %.1f%s / %.1f |", state, $8, ($9 == "yes" ? "*" : ""), $11 }' <<< "$row")"
    done
    echo "$line"
  done
  echo
}

echo "GiB per rank: model state / peak (* fits ${memory} GiB) / sent per step"
echo
table llama3-8b configs/llama3-8b.yaml "ZeRO-0 (DDP)=ZeRO-0 |" "ZeRO-1=ZeRO-1 |" \
  "ZeRO-2=ZeRO-2 |" "ZeRO-3 (FSDP)=ZeRO-3 |" "ZeRO-3 HSDP, groups of 8=ZeRO-3 HSDP 8x" \
  "TP 8 + ZeRO-1=TP 8 + ZeRO-1 |" "TP 8 + ZeRO-3=TP 8 + ZeRO-3 |"
table qwen3-30b-a3b configs/qwen3-30b-a3b.yaml "ZeRO-0 (DDP)=ZeRO-0 |" "ZeRO-1=ZeRO-1 |" \
  "ZeRO-3 (FSDP)=ZeRO-3 |" "EP 8 + ZeRO-0=EP 8 + ZeRO-0 |" "EP 8 + ZeRO-1=EP 8 + ZeRO-1 |" \
  "EP 8 + ZeRO-3=EP 8 + ZeRO-3 |" "EP 64 + ZeRO-1=EP 64 + ZeRO-1 |" \
  "EP 64 + ZeRO-3=EP 64 + ZeRO-3 |" "EP 128 + ZeRO-1=EP 128 + ZeRO-1 |" \
  "EP 128 + ZeRO-3=EP 128 + ZeRO-3 |"
table zero-paper-7.5b bench/zero-paper-7.5b.yaml "ZeRO-0 (DDP)=ZeRO-0 |" "ZeRO-1=ZeRO-1 |" \
  "ZeRO-2=ZeRO-2 |" "ZeRO-3=ZeRO-3 |"
