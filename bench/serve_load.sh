#!/usr/bin/env bash
# `lmtrain serve` under load beside the same model's batched `generate` (issue 41's benchmark).
# Trains a small nanochat-format model on the demo corpus (fortunes, with nanochat's chat tokens),
# serves it, and drives it from 1, 4 and 16 concurrent OpenAI clients (bench/serve_load.py):
# requests/s, time to first token and generated tokens/s. Then `generate --prompts` decodes the
# same number of prompts in batches of the same size, for the throughput the server's batching
# could reach. The server runs once per batching mode (--batching, default both: continuous,
# then static), on the same model, so the two compare on the same machine state.
#   bench/serve_load.sh [--steps N] [--max_tokens N] [--requests N] [--batching "continuous static"]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
gpu_bench_tools
steps=50 max_tokens=64 requests=4 modes="continuous static"
while (($#)); do
  case $1 in
    --batching) modes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --max_tokens) max_tokens=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) die "unknown flag $1 (--steps, --max_tokens, --requests, --batching)" ;;
  esac
done
work=$(mktemp -d /tmp/lmtrain_serve_load.XXXXXX)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
printf '%s\n' /usr/share/games/fortunes/* | head -3 | xargs cat >"$work/corpus.txt"
"$bin" prepare --input "$work/corpus.txt" --output "$work/data" --vocab_size 2048 \
  --doc_separator % --chat_tokens --quiet
"$bin" train --config configs/gpt2-tiny.yaml --data.dir="$work/data" --run.dir="$work/run" \
  --train.max_steps="$steps" --train.eval_every=0 >/dev/null
echo "model: configs/gpt2-tiny.yaml, $steps steps on fortunes; max_tokens $max_tokens"
for mode in $modes; do
  "$bin" serve --checkpoint "$work/run" --chat_format nanochat --port 0 --max_batch 16 \
    --max_tokens "$max_tokens" --batching "$mode" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do grep -q "http://" "$work/serve.log" && break; sleep 0.1; done
  url=$(grep -o 'http://[0-9.:]*' "$work/serve.log" | head -1)
  [[ -n "$url" ]] || die "the server did not start: $(cat "$work/serve.log")"
  "$python" bench/serve_load.py "$url/v1" "$requests" "$max_tokens" 1 4 16 | sed "s/^/$mode: /"
  kill -TERM "$server"
  wait "$server" || true
  grep "stopped after" "$work/serve.log" | sed "s/^/$mode: /"
done
for batch in 1 4 16; do
  : >"$work/prompts.jsonl"
  for i in $(seq $((batch * requests))); do
    echo '{"prompt": "<|bos|><|user_start|>Tell me a fortune about the sea.<|user_end|><|assistant_start|>"}' >>"$work/prompts.jsonl"
  done
  "$bin" generate --checkpoint "$work/run" --prompts "$work/prompts.jsonl" --batch_size "$batch" \
    --max_new_tokens "$max_tokens" --stop_at_eot=false --temperature 0.8 --quiet \
    --output /dev/null 2>&1 | sed "s/^/generate batch $batch: /"
done
