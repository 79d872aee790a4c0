#!/usr/bin/env bash
# GPU speed, side by side in one run: lmtrain against the PyTorch reference trainer
# (bench/reference/train_gpt2.py, eager and torch.compile) on the same model, batch and
# precision. lmtrain runs twice: eager, and with its step captured in a CUDA graph
# (train.cuda_graphs). Prints one table: tokens/s, MFU (6N + 6*L*C*T FLOPs/token against
# --peak_tflops, default 989 = H100 dense bf16) and peak GPU memory; the ratios use the faster
# lmtrain run.
#
# Usage: bench/compare_gpu.sh [--batch B] [--seq_len T] [--steps N] [--warmup N]
#                             [--peak_tflops P] [--no_compile] [--out DIR]
# Env:   LMTRAIN_BIN (default build/lmtrain), PYTHON (default .venv/bin/python or python3)
# Workload: GPT-2 124M (configs/gpt2-124m.yaml, vocab 50304), T=1024, bf16, fused AdamW.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh

batch=16 seq_len=1024 steps=20 warmup=5 peak=989 compile=1 out=""
while (($#)); do
  case "$1" in
    --batch) batch=$2; shift 2 ;;
    --seq_len) seq_len=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --peak_tflops) peak=$2; shift 2 ;;
    --no_compile) compile=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown flag $1 (see --help)" ;;
  esac
done
gpu_bench_tools
out=${out:-$(mktemp -d)}
mkdir -p "$out"

# FLOPs/token of GPT-2 124M at T: 6N + 6*L*C*T, N = 124,475,904 (tied head, vocab 50304).
flops=$(awk -v t="$seq_len" 'BEGIN { printf "%.6g", 6 * 124475904 + 6 * 12 * 768 * t }')
mfu() { awk -v tps="$1" -v f="$flops" -v p="$peak" 'BEGIN { printf "%.3f", tps * f / (p * 1e12) }'; }

echo "compare_gpu: GPT-2 124M, batch $batch x $seq_len, bf16, $steps timed steps; logs in $out"
lmtrain_bench() {  # log, extra flags
  local log=$1
  shift
  "$bin" bench --config configs/gpt2-124m.yaml --model.vocab_size=50304 --data.seq_len="$seq_len" \
    --train.micro_batch_size="$batch" --train.total_batch_size=$((batch * seq_len)) \
    --train.device=cuda --train.precision=bf16 --bench.steps="$steps" --bench.warmup="$warmup" \
    --bench.peak_tflops="$peak" "$@" >"$log" 2>&1 || { cat "$log"; die "lmtrain bench $* failed"; }
}
lmtrain_bench "$out/lmtrain.log" --train.cuda_graphs=false
lmtrain_bench "$out/lmtrain_graph.log" --train.cuda_graphs=true
ref() {
  "$python" bench/reference/train_gpt2.py --device cuda --dtype bf16 --n_layer 12 --n_head 12 \
    --n_embd 768 --vocab_size 50304 --seq_len "$seq_len" --batch_size "$batch" --steps "$steps" \
    --warmup "$warmup" "$@"
}
ref >"$out/pytorch_eager.log" 2>&1 || { cat "$out/pytorch_eager.log"; die "reference (eager) failed"; }
if ((compile)); then
  ref --compile >"$out/pytorch_compiled.log" 2>&1 || { tail -30 "$out/pytorch_compiled.log"; die "reference (compiled) failed"; }
fi

row() {  # name log tokens_field mem_field
  local tps mem
  tps=$(field "$3" <"$2")
  mem=$(field "$4" <"$2")
  printf '| %-22s | %12.0f | %6s | %10.0f |\n' "$1" "$tps" "$(mfu "$tps")" "$mem"
}
echo
echo "| run                    |     tokens/s |    MFU | peak MiB   |"
echo "|------------------------|--------------|--------|------------|"
row "lmtrain (bf16)" "$out/lmtrain.log" tokens_per_s peak_device_mib
row "lmtrain (bf16, graph)" "$out/lmtrain_graph.log" tokens_per_s peak_device_mib
row "PyTorch eager" "$out/pytorch_eager.log" tokens_per_s peak_mem_mib
((compile)) && row "PyTorch torch.compile" "$out/pytorch_compiled.log" tokens_per_s peak_mem_mib
lm=$(field tokens_per_s <"$out/lmtrain.log")
lm_graph=$(field tokens_per_s <"$out/lmtrain_graph.log")
lm=$(awk -v a="$lm" -v b="$lm_graph" 'BEGIN { print (b > a ? b : a) }')
eager=$(field tokens_per_s <"$out/pytorch_eager.log")
echo
awk -v a="$lm" -v b="$eager" 'BEGIN { printf "ratio vs eager: %.3f\n", a / b }'
if ((compile)); then
  comp=$(field tokens_per_s <"$out/pytorch_compiled.log")
  awk -v a="$lm" -v b="$comp" 'BEGIN { printf "ratio vs compiled: %.3f\n", a / b }'
fi
