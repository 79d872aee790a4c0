# shellcheck shell=bash
# `LMTRAIN_DEVICE_STEPS=first` of scripts/device_check.sh, sourced by it after the build (it
# provides note, field, elapsed, OUT, summary, python and t0): the most one device call of about
# 9 minutes can learn. In order, each step under its own time limit and skipped when less than
# its share of LMTRAIN_DEVICE_BUDGET_S (default 540 s) is left, so the summary always comes back:
#   1. every GPU test (Cuda*), 4 at a time, and beside them the one-rank NCCL test alone with
#      NCCL's log (and every thread's stack if it hangs);
#   2. GPT-2 124M (T=1024, batch 16): fused kernels off / auto (every kernel, since 2026-11-28) /
#      on (auto + the unproven variants: classifier_vectorized) / auto + CUDA graph, fp16 +
#      graph, fp8, and ZeRO-3 on one rank beside the plain run (issue 42: >= 0.97x); then
#      compiled PyTorch, and Kineto tables of the eager bf16 run, the fp8 run (0.45x bf16 on
#      2026-11-28: where its time goes) and compiled PyTorch's step;
#   3. Qwen3-0.6B (T=2048, batch 4) against Hugging Face transformers eager and compiled, and
#      where its GPU time goes;
#   4. fp32, bf16 and fp8 losses over 200 steps (needs .devdata/fortunes);
#   5. the 64-expert Qwen3-MoE shape against HF eager, with the time left.
budget=${LMTRAIN_DEVICE_BUDGET_S:-540}
export PYTHON=$python
# step LIMIT_S NAME CMD...: runs CMD under LIMIT_S when that much of the budget is left; returns 1
# only when skipped.
step() {
  local limit=$1 name=$2
  shift 2
  if ((SECONDS - t0 + limit > budget)); then
    note "skipped: $name (${limit}s would pass the ${budget}s budget at $(elapsed))"
    return 1
  fi
  timeout "$limit" "$@" || note "$name: exit $? ($(elapsed))"
  return 0
}

note ""
note "## GPU tests"
# The one-rank NCCL test hung on 2026-11-27: it runs alone, beside the others, with NCCL's log.
nccl_log="$OUT/nccl_test.log"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,NET TORCH_DISTRIBUTED_DEBUG=DETAIL \
  build/tests/lmtrain_cuda_tests --gtest_filter='*OverNccl*' >"$nccl_log" 2>&1 &
nccl_pid=$!
step 200 "GPU tests" bash -c "cd build && ctest -j4 --timeout 150 --output-on-failure -R '^Cuda' \
  -E 'OverNccl'" >"$OUT/ctest_cuda.log" 2>&1
note "GPU tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest_cuda.log" | tail -1) ($(elapsed))"
grep -E '^\s+[0-9]+/[0-9]+ Test' "$OUT/ctest_cuda.log" | sed 's/  */ /g' | tee -a "$summary"
for _ in $(seq 30); do kill -0 "$nccl_pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$nccl_pid" 2>/dev/null; then
  command -v gdb >/dev/null &&
    timeout 30 gdb -p "$nccl_pid" -batch -ex "thread apply all bt" >"$OUT/nccl_hang_stacks.txt" 2>&1
  pkill -9 -P "$nccl_pid" 2>/dev/null
  kill -9 "$nccl_pid"
  note "NCCL test: HUNG (nccl_test.log, nccl_hang_stacks.txt) ($(elapsed))"
  grep -E 'NCCL (INFO|WARN)' "$nccl_log" | tail -8 | cut -c1-160 | tee -a "$summary"
else
  wait "$nccl_pid"
  note "NCCL test: exit $? ($(grep -cE '^\[ +OK' "$nccl_log") ok) ($(elapsed))"
fi

note ""
note "## GPT-2 124M, T=1024, batch 16 (bf16 unless named)"
gpt2=(--config configs/gpt2-124m.yaml --model.vocab_size=50304 --train.micro_batch_size=16
  --train.total_batch_size=16384 --train.precision=bf16 --train.device=cuda
  --bench.peak_tflops=989 --bench.steps=20 --bench.warmup=5)
# lmtrain_rows "name|flags"...: one bench run per variant, a table row each.
lmtrain_rows() {
  local v name flags log
  for v in "$@"; do
    name=${v%%|*}; flags=${v#*|}; log="$OUT/first_${name//[^A-Za-z0-9]/_}.log"
    # shellcheck disable=SC2086
    step 60 "lmtrain $name" build/lmtrain bench "${gpt2[@]}" $flags >"$log" 2>&1 || continue
    note "$(printf '| lmtrain %-30s | %10s tok/s | MFU %s | peak %s MiB |' "$name" \
      "$(field tokens_per_s <"$log")" "$(field mfu <"$log")" "$(field peak_device_mib <"$log")")"
  done
}
eager="--train.cuda_graphs=false"
lmtrain_rows "fused off|--train.fused_kernels=off $eager" \
  "fused auto|$eager" \
  "fused on (+ unproven variants)|--train.fused_kernels=on $eager" \
  "fused auto + CUDA graph|--train.cuda_graphs=true" \
  "ZeRO-3 on 1 rank|$eager --dist.zero=3" \
  "fp16 + CUDA graph|--train.cuda_graphs=true --train.precision=fp16" \
  "fp8|$eager --train.precision=fp8"
step 150 "PyTorch compiled" "$python" bench/reference/train_gpt2.py --device cuda --dtype bf16 \
  --n_layer 12 --n_head 12 --n_embd 768 --vocab_size 50304 --seq_len 1024 --batch_size 16 \
  --steps 20 --warmup 5 --compile >"$OUT/first_pytorch_compiled.log" 2>&1 &&
  note "$(printf '| %-38s | %10s tok/s | peak %s MiB |' "PyTorch torch.compile" \
    "$(field tokens_per_s <"$OUT/first_pytorch_compiled.log")" \
    "$(field peak_mem_mib <"$OUT/first_pytorch_compiled.log")")"
for v in "bf16|$eager" "fp8|$eager --train.precision=fp8"; do
  name=${v%%|*}; flags=${v#*|}
  note ""
  note "### Top GPU kernels per step, lmtrain $name, eager (3 profiled steps)"
  # shellcheck disable=SC2086
  step 60 "profile $name" env LMTRAIN_PROFILE="$OUT/trace_first_$name.json" build/lmtrain bench \
    "${gpt2[@]}" $flags --bench.steps=3 --bench.warmup=3 >"$OUT/first_profile_$name.log" 2>&1 &&
    grep -A15 "profile: GPU kernels" "$OUT/first_profile_$name.log" | sed 's/^.*profile: //' |
    cut -c1-150 | tee -a "$summary"
  [[ -f "$OUT/trace_first_$name.json" ]] &&
    "$python" bench/trace_owners.py "$OUT/trace_first_$name.json" --top 20 | tee -a "$summary"
done
note ""
note "### Top GPU kernels per step, PyTorch torch.compile (3 profiled steps)"
step 150 "profile PyTorch compiled" "$python" bench/reference/train_gpt2.py --device cuda \
  --dtype bf16 --n_layer 12 --n_head 12 --n_embd 768 --vocab_size 50304 --seq_len 1024 \
  --batch_size 16 --steps 3 --warmup 5 --compile --profile "$OUT/trace_first_compiled.json" \
  >"$OUT/first_profile_compiled.log" 2>&1 &&
  sed -n '/^profile: trace/,/^peak_mem_mib/p' "$OUT/first_profile_compiled.log" | head -22 |
  cut -c1-150 | tee -a "$summary"
[[ -f "$OUT/trace_first_compiled.json" ]] &&
  "$python" bench/trace_owners.py "$OUT/trace_first_compiled.json" --top 20 | tee -a "$summary"

note ""
note "## Qwen3-0.6B, T=2048, batch 4 (HF eager runs out of 80 GB at 8), bf16, against HF transformers"
step 200 "qwen3 vs HF" bash bench/compare_gpu_hf.sh --model qwen3-0.6b --batch 4 --out "$OUT/hf_qwen3" \
  >"$OUT/first_hf_qwen3.log" 2>&1 && grep -E '^\||^ratio|error' "$OUT/first_hf_qwen3.log" |
  tee -a "$summary"
note ""
note "### Where Qwen3-0.6B's GPU time goes (lmtrain, batch 4, 3 profiled steps)"
step 60 "profile qwen3" env LMTRAIN_PROFILE="$OUT/trace_first_qwen3.json" build/lmtrain bench \
  --config configs/qwen3-0.6b.yaml --model.vocab_size=151936 --data.seq_len=2048 \
  --train.micro_batch_size=4 --train.total_batch_size=8192 --train.precision=bf16 \
  --train.device=cuda --train.cuda_graphs=false --bench.steps=3 --bench.warmup=3 \
  >"$OUT/first_profile_qwen3.log" 2>&1 && [[ -f "$OUT/trace_first_qwen3.json" ]] &&
  "$python" bench/trace_owners.py "$OUT/trace_first_qwen3.json" --top 20 | tee -a "$summary"

if [[ -f .devdata/fortunes/prepare.json ]]; then
  note ""
  note "## fp32, bf16 and fp8 losses over 200 steps (GPT-2 124M shape, fortunes, batch 16 x 512)"
  for p in fp32 bf16 fp8; do
    step 60 "train $p" build/lmtrain train --config configs/gpt2-124m.yaml \
      --data.dir=.devdata/fortunes --run.dir="$OUT/run_$p" --data.seq_len=512 \
      --train.micro_batch_size=16 --train.total_batch_size=8192 --train.max_steps=200 \
      --optim.warmup_steps=20 --train.eval_every=0 --checkpoint.every=0 --log.every=20 \
      --log.tensorboard=false --train.device=cuda --train.precision=$p >"$OUT/train_$p.log" 2>&1
    note "train $p: $(grep -cE 'step' "$OUT/train_$p.log") log lines, last: $(tail -1 "$OUT/train_$p.log" | cut -c1-140)"
  done
  "$python" bench/loss_gaps.py "$OUT" fp32 bf16 fp8 2>&1 | tee -a "$summary"
fi

note ""
note "## Qwen3-MoE shape (64 experts, top-8), T=2048, batch 4, bf16, against HF eager"
step 150 "moe vs HF" bash bench/compare_gpu_hf.sh --model qwen3-moe-bench --batch 4 --no_compile \
  --out "$OUT/hf_moe" >"$OUT/first_hf_moe.log" 2>&1 &&
  grep -E '^\||^ratio|error' "$OUT/first_hf_moe.log" | tee -a "$summary"
note ""
note "total: $(elapsed)"
cat "$summary"
