#!/usr/bin/env bash
# Temporal-encoder pretraining speed (issue 26), side by side in one run: lmtrain training
# configs/pretrain_temporal.yaml (a time-series encoder aligned to a frozen Qwen2.5-0.5B-shaped
# random LM, bf16 autocast over fp32 weights, samples generated on the fly) against the PyTorch
# reference of the same wrapper (bench/reference/temporal_encoder.py bench: the same encoder and
# projector, the LM through transformers' inputs_embeds), eager and torch.compile. Prints one
# table: samples/s, MFU (model FLOPs per sample from `temporal_encoder.py flops`: the frozen LM
# 4N + 6LCT per token, the encoder 6N + 6LWP per patch, against --peak_tflops, default 989 = H100
# dense bf16) and peak GPU memory.
#
# Usage: bench/temporal_gpu.sh [--device cuda|cpu] [--tiny] [--batch B] [--accum A]
#                              [--steps N] [--warmup N] [--peak_tflops P] [--no_compile] [--out DIR]
#   --tiny: a 2-layer width-64 LM, a 1-layer encoder and series of 64/128 values (rows of 96
#   tokens), in fp32: the CPU check that the script runs end to end (--device cpu --tiny).
# Env:   LMTRAIN_BIN (default build/lmtrain), PYTHON (default .venv/bin/python or python3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh

device=cuda tiny=0 batch=8 accum=4 steps=20 warmup=5 peak="" compile=1 out=""
while (($#)); do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --batch) batch=$2; shift 2 ;;
    --accum) accum=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --peak_tflops) peak=$2; shift 2 ;;
    --no_compile) compile=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) die "unknown flag $1 (see --help)" ;;
  esac
done
gpu_bench_tools
out=${out:-$(mktemp -d /tmp/lmtrain_temporal_gpu.XXXXXX)}
mkdir -p "$out"
ref=bench/reference/temporal_encoder.py
run_or_die() {  # log file, command...
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -30 "$log" >&2; die "failed: $* (log: $log)"; }
}

# The shapes: the LM (make-lm flags and the matching model.* keys), the encoder, the data.
if ((tiny)); then
  lm_shape=(--num_hidden_layers 2 --hidden_size 64 --num_attention_heads 4
    --num_key_value_heads 2 --intermediate_size 128 --vocab_size 4096)
  lm_keys=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.n_kv_head=2
    --model.head_dim=16 --model.mlp_hidden=128 --model.vocab_size=4096 --model.block_size=32768)
  enc=(--max_length 128 --patch_len 16 --stride 16 --layers 1 --width 32 --heads 2
    --mlp_ratio 4 --num_tokens 0 --seq_len 96 --lengths 64,128)
  enc_keys=(--model.temporal.max_length=128 --model.temporal.layers=1 --model.temporal.width=32
    --model.temporal.heads=2 --data.seq_len=96 --data.temporal.lengths=64,128)
  dtype=fp32
else
  lm_shape=()
  lm_keys=()
  enc=()  # the reference's defaults are configs/pretrain_temporal.yaml's
  enc_keys=()
  dtype=bf16
fi
if [[ -z "$peak" ]]; then
  if [[ "$device" == cuda ]]; then
    peak=989
  else  # this CPU's fp32 GEMM peak, so the MFU column means something here too
    peak=$("$python" -c 'import time, torch
a = torch.randn(1024, 1024); b = torch.randn(1024, 1024); a @ b; best = 0
for _ in range(10):
    t = time.perf_counter(); a @ b; best = max(best, 2 * 1024**3 / (time.perf_counter() - t))
print(f"{best / 1e12:.4f}")')
  fi
fi

echo "temporal_gpu: configs/pretrain_temporal.yaml$( ((tiny)) && echo ' (tiny shapes)'), $device," \
  "$dtype, $batch x $accum samples per step, $steps timed steps; logs in $out"
# A tokenizer (the LM's: prompts are written with it), from the generator's own text.
run_or_die "$out/td.log" "$bin" temporal-data --num_samples 2000 --output_dir "$out/td" \
  --length 64 --lm_text --quiet
run_or_die "$out/tok.log" "$bin" prepare --input "$out/td/lm_text.jsonl" --output "$out/tok" \
  --vocab_size 4096
# A random LM of the shape, imported as a user imports Qwen2.5.
run_or_die "$out/make_lm.log" "$python" "$ref" make-lm --out "$out/hf_lm" \
  --tokenizer "$out/tok/tokenizer.json" "${lm_shape[@]}"
run_or_die "$out/import.log" "$bin" import hf "$out/hf_lm" --output "$out/lm"
flops=$("$python" "$ref" flops --lm "$out/hf_lm" "${enc[@]}" | field flops_per_sample)
mfu() { awk -v s="$1" -v f="$flops" -v p="$peak" 'BEGIN { printf "%.3f", s * f / (p * 1e12) }'; }

# lmtrain: the pretrainer's config, timed by its own samples/s (metrics.jsonl, each step
# logged), the median over the steps after the warm-up.
precision=$([[ "$dtype" == bf16 ]] && echo bf16 || echo fp32)
run_or_die "$out/lmtrain.log" "$bin" train --config configs/pretrain_temporal.yaml \
  --model.init_from="$out/lm/checkpoints/latest" "${lm_keys[@]}" "${enc_keys[@]}" \
  --train.device="$device" --train.precision="$precision" --train.micro_batch_size="$batch" \
  --train.grad_accum_steps="$accum" --train.max_steps=$((warmup + steps)) \
  --log.every=1 --train.eval_every=0 --checkpoint.every=0 --checkpoint.every_epoch=false \
  --log.tensorboard=false --run.dir="$out/lmtrain_run"
read -r lm_sps lm_mem < <("$python" - "$out/lmtrain_run/metrics.jsonl" "$warmup" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
v = [r["samples_per_s"] for r in recs if "samples_per_s" in r][int(sys.argv[2]):]
mem = max((r.get("peak_mem_mib", 0) for r in recs), default=0)
print(f"{statistics.median(v):.2f}", f"{mem / 1024:.2f}" if mem else "-")
PY
)

reference() {  # log, extra flags
  local log=$1
  shift
  run_or_die "$log" "$python" "$ref" bench --lm "$out/hf_lm" "${enc[@]}" --device "$device" \
    --dtype "$dtype" --batch "$batch" --accum "$accum" --steps "$steps" --warmup "$warmup" "$@"
}
reference "$out/pytorch_eager.log"
((compile)) && reference "$out/pytorch_compiled.log" --compile

row() {  # name samples/s peak-GiB
  printf '| %-24s | %10.2f | %6s | %8s |\n' "$1" "$2" "$(mfu "$2")" "${3:--}"
}
echo
echo "model FLOPs per sample: $flops; peak ${peak} TFLOP/s"
echo "| run                      |  samples/s |    MFU | peak GiB |"
echo "|--------------------------|------------|--------|----------|"
row "lmtrain ($dtype)" "$lm_sps" "$lm_mem"
eager=$(field samples_per_s <"$out/pytorch_eager.log")
row "PyTorch eager" "$eager" "$(field peak_gpu_gib <"$out/pytorch_eager.log")"
if ((compile)); then
  comp=$(field samples_per_s <"$out/pytorch_compiled.log")
  row "PyTorch torch.compile" "$comp" "$(field peak_gpu_gib <"$out/pytorch_compiled.log")"
fi
echo
awk -v a="$lm_sps" -v b="$eager" 'BEGIN { printf "ratio vs eager: %.3f\n", a / b }'
((compile)) && awk -v a="$lm_sps" -v b="$comp" 'BEGIN { printf "ratio vs compiled: %.3f\n", a / b }'
exit 0
