#!/usr/bin/env bash
# The GPU machine's one command (run from the repo root there, e.g. through the device tool):
# builds lmtrain against the machine's torch, runs the whole suite including the GPU tests
# (tests/cuda, named Cuda*), runs the GPU benchmarks, prints one summary table and writes every
# log under $OUT (default /tmp/lmtrain-device).
#
# The machine has torch 2.11+cu130 in its python3 but none of our -dev packages and no network:
# carry the .debs fetched here by `scripts/fetch_device_debs.sh` (into .deb/, git-ignored) and
# the prepared demo corpus (.devdata/, from scripts/fetch_device_debs.sh too); for `first`, also
# .prebuilt/ (scripts/device_prebuilt.sh here): binaries that skip the build there when they run.
#   LMTRAIN_DEVICE_STEPS=first|all|tests|cpu-tests|kernels|profile|hf|bench   which parts
#   (default all; a device call is limited to 10 minutes, so run the parts one by one while the
#   machine is warm: the build is reused).
#
# `first` is for a session with little device time (15 minutes in all, the machine's start
# included): one call of about 9 minutes that builds only lmtrain and the GPU tests, runs the
# GPU tests (Cuda*), then GPT-2 124M with the fused kernels off, on, and on with a CUDA graph,
# beside compiled PyTorch, the cuDNN and flash attention backends, and one Kineto table of the
# fused run. Each step has its own time
# limit and is skipped when less than its share of LMTRAIN_DEVICE_BUDGET_S (default 540 s) is
# left, so the summary always comes back. `cpu-tests` (the CPU suite on the GPU machine's
# build) is not part of `all`: CI runs it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/lmtrain-device}
mkdir -p "$OUT"
parts=${LMTRAIN_DEVICE_STEPS:-all}
want() { [[ "$parts" == all || "$parts" == "$1" ]]; }
summary="$OUT/summary.md"
: >"$summary"
source bench/common.sh  # field
note() { echo "$*" | tee -a "$summary"; }
t0=$SECONDS
elapsed() { echo "$((SECONDS - t0))s"; }

# ---- dependencies from the carried .debs, unpacked aside (never into /)
deps=/opt/deps
mkdir -p "$deps"
for f in .deb/*.deb; do dpkg -x "$f" "$deps"; done
export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python=${PYTHON:-$(command -v python3)}
prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
# Parquet input links the pyarrow wheel's Arrow/Parquet C++; a python without pyarrow builds
# without it (parquet input refused, its tests skipped).
parquet=ON
"$python" -c 'import pyarrow' >/dev/null 2>&1 || parquet=OFF
# `first` exercises no parquet input: leave pyarrow's headers out of its build.
[[ "$parts" == first ]] && parquet=OFF
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
note "# lmtrain device check"
note ""
note "GPU: $(cat "$OUT/gpu.txt"); torch $("$python" -c 'import torch; print(torch.__version__)')"

# ---- build, unless binaries built elsewhere were carried and run here (scripts/device_prebuilt.sh;
# `first` only: it needs lmtrain and the GPU tests alone). LMTRAIN_DEVICE_PREBUILT=0 builds anyway.
source scripts/device_prebuilt.sh
if [[ "$parts" == first && "${LMTRAIN_DEVICE_PREBUILT:-1}" != 0 ]] && use_prebuilt "$python" "$deps"; then
  note "build: skipped, the carried binaries run here ($(elapsed)): $(tr '\n' ';' <.prebuilt/manifest.txt)"
  source scripts/device_first.sh
  exit 0
fi
[[ "$parts" == first ]] && note "build: here (carried binaries not used: ${prebuilt_why:-LMTRAIN_DEVICE_PREBUILT=0})"
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix;$deps/usr" \
  "-DCMAKE_CXX_FLAGS=-idirafter $deps/usr/include" "-DLMTRAIN_PYTHON=$python" \
  "-DLMTRAIN_PARQUET=$parquet" \
  >"$OUT/configure.log" 2>&1; then
  note "configure FAILED (see configure.log)"; tail -30 "$OUT/configure.log"; exit 1
fi
targets=()  # all of them
[[ "$parts" == first ]] && targets=(lmtrain lmtrain_cuda_tests)
if ! ninja -C build -j"$(nproc)" "${targets[@]}" >"$OUT/build.log" 2>&1; then
  note "build FAILED (see build.log)"; grep -m5 -A5 "error" "$OUT/build.log"; exit 1
fi
note "build: ok ($(elapsed)); parquet input $parquet"

# ---- first: the most a 15-minute device budget can learn (scripts/device_first.sh)
if [[ "$parts" == first ]]; then
  source scripts/device_first.sh
  exit 0
fi

# ---- tests: the CPU suite (GPUs hidden; only when asked, CI runs it) and the GPU tests
if [[ "$parts" == cpu-tests ]]; then
(cd build && ctest -j"$(nproc)" --timeout 600 --output-on-failure -E '^Cuda') >"$OUT/ctest_cpu.log" 2>&1
note "CPU suite: $(grep -E 'tests passed|tests failed' "$OUT/ctest_cpu.log" | tail -1) ($(elapsed))"
grep -E '^\s+[0-9]+ - ' "$OUT/ctest_cpu.log" | head -20 | tee -a "$summary"
fi
if want tests; then
(cd build && ctest --timeout 600 --output-on-failure -R '^Cuda') >"$OUT/ctest_cuda.log" 2>&1
note "GPU tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest_cuda.log" | tail -1) ($(elapsed))"
grep -E '^\s+[0-9]+ - |Passed|Failed|Skipped' "$OUT/ctest_cuda.log" | grep -E 'Cuda' | tee -a "$summary"
fi
# ---- the fused GPU kernels (src/kernels/cuda): their GPU tests against libtorch's ops, then
# each model's speed with every kernel on (train.fused_kernels=on) against off, same run. A
# kernel becomes `auto`'s default (proven_on_gpu in src/kernels/kernel_switch.cpp) only after
# its CudaFusedKernels test passes here.
if want kernels; then
  note ""
  note "## Fused GPU kernels"
  (cd build && ctest --timeout 600 --output-on-failure -R '^CudaFusedKernels|^CudaMoe') \
    >"$OUT/ctest_kernels.log" 2>&1
  note "kernel tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest_kernels.log" | tail -1)"
  grep -E '^\s+[0-9]+ - |Passed|Failed|Skipped' "$OUT/ctest_kernels.log" | grep -E 'Cuda' |
    tee -a "$summary"
  for m in "gpt2-124m|--config configs/gpt2-124m.yaml --model.vocab_size=50304 --train.micro_batch_size=16 --train.total_batch_size=16384" \
           "qwen3-0.6b|--config configs/qwen3-0.6b.yaml --model.vocab_size=151936 --data.seq_len=2048 --train.micro_batch_size=8 --train.total_batch_size=16384"; do
    name=${m%%|*}; flags=${m#*|}
    for k in off on; do
      # shellcheck disable=SC2086
      build/lmtrain bench --train.device=cuda --bench.peak_tflops=989 --train.precision=bf16 \
        --train.fused_kernels=$k $flags >"$OUT/kernels_${name}_$k.log" 2>&1
      note "$(printf '| %-12s | fused_kernels=%-3s | %10s tok/s | MFU %s | peak %s MiB |' \
        "$name" "$k" "$(field tokens_per_s <"$OUT/kernels_${name}_$k.log")" \
        "$(field mfu <"$OUT/kernels_${name}_$k.log")" \
        "$(field peak_device_mib <"$OUT/kernels_${name}_$k.log")")"
    done
  done
  for a in auto cudnn flash efficient; do
    build/lmtrain bench --train.device=cuda --bench.peak_tflops=989 --train.precision=bf16 \
      --train.fused_kernels=on --train.attention_backend=$a --config configs/qwen3-0.6b.yaml \
      --model.vocab_size=151936 --data.seq_len=2048 --train.micro_batch_size=8 \
      --train.total_batch_size=16384 >"$OUT/attention_qwen3_$a.log" 2>&1
    note "$(printf '| qwen3-0.6b   | attention_backend=%-9s | %10s tok/s | MFU %s |' "$a" \
      "$(field tokens_per_s <"$OUT/attention_qwen3_$a.log")" \
      "$(field mfu <"$OUT/attention_qwen3_$a.log")")"
  done
  note "($(elapsed))"
fi
# ---- where a step's GPU time goes: Kineto over a few steps of lmtrain (eager and graphed) and
# torch.profiler over the PyTorch reference, same model and batch (profiling slows the steps:
# these tables are breakdowns, the timings are in the benchmarks below)
if want profile; then
  note ""
  note "## Top GPU kernels per step (GPT-2 124M, T=1024, batch 16, bf16, 3 profiled steps)"
  for v in "eager|--train.cuda_graphs=false" "CUDA graph|--train.cuda_graphs=true"; do
    name=${v%%|*}; flags=${v#*|}; tag=${name// /_}
    # shellcheck disable=SC2086
    LMTRAIN_PROFILE="$OUT/trace_lmtrain_$tag.json" build/lmtrain bench --train.device=cuda \
      --config configs/gpt2-124m.yaml --model.vocab_size=50304 --train.micro_batch_size=16 \
      --train.total_batch_size=16384 --train.precision=bf16 --bench.steps=3 --bench.warmup=3 \
      $flags >"$OUT/profile_lmtrain_$tag.log" 2>&1
    note ""
    note "### lmtrain ($name)"
    grep -A15 "profile: GPU kernels" "$OUT/profile_lmtrain_$tag.log" | sed 's/^.*profile: //' |
      tee -a "$summary"
  done
  "$python" bench/reference/train_gpt2.py --device cuda --dtype bf16 --n_layer 12 --n_head 12 \
    --n_embd 768 --vocab_size 50304 --seq_len 1024 --batch_size 16 --steps 3 --warmup 3 \
    --profile "$OUT/trace_pytorch_eager.json" >"$OUT/profile_pytorch_eager.log" 2>&1
  note ""
  note "### PyTorch eager"
  sed -n '/^profile: trace/,/^peak_mem_mib/p' "$OUT/profile_pytorch_eager.log" | head -22 |
    tee -a "$summary"
  note "($(elapsed))"
fi
# ---- the Qwen3 shapes against Hugging Face transformers (eager and compiled; the compiles take
# minutes, so this is a part of its own)
if want hf; then
  note ""
  note "## Qwen3 shapes against Hugging Face transformers (bench/compare_gpu_hf.sh), T=2048, bf16"
  for m in qwen3-0.6b qwen3-moe-bench; do
    bash bench/compare_gpu_hf.sh --model "$m" --out "$OUT/hf_$m" >"$OUT/compare_gpu_hf_$m.log" 2>&1
    note ""
    note "$m:"
    grep -E '^\||^ratio|error' "$OUT/compare_gpu_hf_$m.log" | tee -a "$summary"
  done
  note "($(elapsed))"
fi
want bench || { cat "$summary"; exit 0; }

# ---- benchmarks
note ""
note "## GPT-2 124M, T=1024, bf16 (bench/compare_gpu.sh)"
for b in 16 32; do
  bash bench/compare_gpu.sh --batch "$b" --out "$OUT/gpu_b$b" >"$OUT/compare_gpu_b$b.log" 2>&1
  note ""
  note "batch $b:"
  grep -E '^\||^ratio' "$OUT/compare_gpu_b$b.log" | tee -a "$summary"
done
note "($(elapsed))"

bench() { build/lmtrain bench --train.device=cuda --bench.peak_tflops=989 "$@"; }
note ""
note "## lmtrain bench variants (GPT-2 124M, T=1024, batch 16)"
for v in "fp32 (TF32)|--train.precision=fp32 --train.cuda_graphs=false" \
         "bf16|--train.precision=bf16 --train.cuda_graphs=false" \
         "bf16 + CUDA graph|--train.precision=bf16 --train.cuda_graphs=true" \
         "bf16 + activation checkpointing|--train.precision=bf16 --train.activation_checkpointing=block" \
         "bf16 + ZeRO-3 on 1 rank|--train.precision=bf16 --train.cuda_graphs=false --dist.zero=3" \
         "fp16|--train.precision=fp16 --train.cuda_graphs=false" \
         "fp16 + CUDA graph|--train.precision=fp16 --train.cuda_graphs=true" \
         "fp8|--train.precision=fp8 --train.cuda_graphs=false"; do
  name=${v%%|*}; flags=${v#*|}
  # shellcheck disable=SC2086
  bench --config configs/gpt2-124m.yaml --model.vocab_size=50304 --train.micro_batch_size=16 \
    --train.total_batch_size=16384 $flags >"$OUT/bench_${name// /_}.log" 2>&1
  note "$(printf '| %-32s | %10s tok/s | MFU %s | peak %s MiB |' "$name" \
    "$(field tokens_per_s <"$OUT/bench_${name// /_}.log")" "$(field mfu <"$OUT/bench_${name// /_}.log")" \
    "$(field peak_device_mib <"$OUT/bench_${name// /_}.log")")"
done
note "($(elapsed))"


if [[ -f .devdata/fortunes/prepare.json ]]; then
  note ""
  note "## bf16 vs fp32 and fp8 vs bf16 loss over 200 steps (GPT-2 124M shape, fortunes, batch 16 x 512)"
  for p in fp32 bf16 fp8; do
    build/lmtrain train --config configs/gpt2-124m.yaml --data.dir=.devdata/fortunes \
      --run.dir="$OUT/run_$p" --data.seq_len=512 --train.micro_batch_size=16 \
      --train.total_batch_size=8192 --train.max_steps=200 --optim.warmup_steps=20 \
      --train.eval_every=0 --checkpoint.every=0 --log.every=20 --log.tensorboard=false \
      --train.device=cuda --train.precision=$p >"$OUT/train_$p.log" 2>&1
  done
  "$python" bench/loss_gaps.py "$OUT" fp32 bf16 fp8 2>&1 | tee -a "$summary"
fi

note ""
note "## Temporal encoder, configs/pretrain_temporal.yaml (Qwen2.5-0.5B-shaped random LM), bf16 (bench/temporal_gpu.sh)"
PYTHON="$python" bash bench/temporal_gpu.sh --out "$OUT/temporal_gpu" >"$OUT/temporal_gpu.log" 2>&1
grep -E '^\||^ratio|^model FLOPs' "$OUT/temporal_gpu.log" | tee -a "$summary"
note "($(elapsed))"
note ""
note "total: $(elapsed)"
cat "$summary"
