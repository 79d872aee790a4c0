#!/usr/bin/env bash
# Issue 43: does pinning each rank to its own core change 2-rank DDP scaling? Per round, on
# compare_ddp.sh's gpt2-small-cpu flags: lmtrain 1 rank, 2 ranks by `lmtrain launch`
# (unpinned), and 2 ranks started by hand with torchrun's environment, each under
# `taskset -c RANK` (its compute thread and its Gloo threads on one core). Prints tokens/s
# (global), rank 0's unhidden communication per step and each 2-rank run's scaling.
# Usage: bench/pinned_ddp.sh [ROUNDS (3)] [fp32|bf16 (train.grad_reduce_dtype)]
# Env: LMTRAIN_BIN (default build/lmtrain)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B="${LMTRAIN_BIN:-build/lmtrain}"
rounds=${1:-3}; dtype=${2:-fp32}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
F=(--config configs/gpt2-small-cpu.yaml --model.vocab_size=8192 --data.seq_len=256
   --train.micro_batch_size=8 --train.total_batch_size=0 --train.threads=1 --train.workers=1
   --bench.steps=10 --bench.warmup=2)
tps() { grep -h "tokens_per_s:" "$@" | head -1 | awk -F"tokens_per_s: " "{print \$2}"; }
waitms() { grep -h "comm_wait_ms:" "$@" | head -1 | awk -F"comm_wait_ms: " "{print \$2}"; }
for r in $(seq 1 "$rounds"); do
  $B bench "${F[@]}" > $tmp/one.log 2>&1
  one=$(tps $tmp/one.log)
  $B launch --standalone --nproc_per_node=2 -- bench "${F[@]}" --train.grad_reduce_dtype=$dtype > $tmp/ddp.log 2>&1
  ddp=$(tps $tmp/ddp.log); dw=$(waitms $tmp/ddp.log)
  port=$((29600 + r))
  for rk in 0 1; do
    taskset -c $rk env RANK=$rk WORLD_SIZE=2 LOCAL_RANK=$rk LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port $B bench "${F[@]}" --train.grad_reduce_dtype=$dtype \
      > $tmp/r$rk.log 2>&1 &
  done
  wait
  pin=$(tps $tmp/r0.log); pw=$(waitms $tmp/r0.log)
  echo "round $r: one $one | ddp $ddp (wait $dw) scaling $(echo "$ddp/$one" | bc -l | cut -c1-5) | pinned $pin (wait $pw) scaling $(echo "$pin/$one" | bc -l | cut -c1-5) | busy $(uptime | awk -F'average: ' '{print $2}')"
done
