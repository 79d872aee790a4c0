#!/usr/bin/env bash
# The streaming loader against the trainer (issue 28): the corpus of bench/prepare_scale.sh
# (GB gigabytes of English-like JSONL over 8 files, two zstd-compressed, one parquet; its
# tokenizer of 8192 ids from that script's prepare), read with data.source=stream.
#   1. `lmtrain bench --loader`: the loader alone, at 1 and 2 tokenizer threads, with each
#      config's micro-batch and seq_len: the tokens/s it sustains.
#   2. `lmtrain train --data.source=stream` for gpt2-tiny and gpt2-small-cpu, STEPS steps: the
#      trainer's tokens/s and the step log's data wait (ms per step the step waited for the
#      loader; 0 = the loader was always ahead), means over the steps after the first 5.
# Usage: bench/stream_loader.sh [GB] [STEPS]   (default 0.3 GB, 60 steps)
# Env:   LMTRAIN_BIN (default build/lmtrain), LMTRAIN_VENV (default .venv),
#        LMTRAIN_BENCH_DIR scratch dir (default /tmp/lmtrain_stream_loader; reused if there)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
gb=${1:-0.3}
steps=${2:-60}
bin=${LMTRAIN_BIN:-build/lmtrain}
python=${LMTRAIN_VENV:-.venv}/bin/python
dir=${LMTRAIN_BENCH_DIR:-/tmp/lmtrain_stream_loader}
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
if [[ ! -f "$dir/out/tokenizer.json" ]]; then
  LMTRAIN_BENCH_DIR="$dir" bash bench/prepare_scale.sh "$gb" 2 >"$dir.prepare.log" 2>&1 ||
    { cat "$dir.prepare.log" >&2; die "generating the corpus failed"; }
fi
stream=(--data.source=stream "--data.stream.inputs=$dir/corpus"
  "--data.stream.tokenizer=$dir/out/tokenizer.json")
echo "corpus: $(du -sh "$dir/corpus" | cut -f1) in $dir/corpus; CPU busy before: $(busy_pct 2)%"
printf '%-16s %-8s %22s %16s %16s\n' config threads "loader tokens/s alone" "train tokens/s" \
  "data wait ms"
for cfg in gpt2-tiny gpt2-small-cpu; do
  for threads in 1 2; do
    loader=$("$bin" bench --loader --config "configs/$cfg.yaml" "${stream[@]}" \
      --data.tokenizer_threads=$threads --bench.steps="$steps" | field loader_tokens_per_s)
    run="$dir/run_${cfg}_$threads"
    rm -rf "$run"
    "$bin" train --config "configs/$cfg.yaml" "${stream[@]}" --data.tokenizer_threads=$threads \
      --run.dir="$run" --train.max_steps="$steps" --train.epochs=0 --train.eval_every=0 \
      --checkpoint.every=0 --log.every=1 --data.stream.val_fraction=0 >"$run.log" 2>&1 ||
      { tail -n 5 "$run.log" >&2; die "training $cfg failed"; }
    read -r tps wait < <("$python" - "$run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][5:]
print(sum(r["tokens_per_s"] for r in rows) / len(rows), sum(r["data_wait_ms"] for r in rows) / len(rows))
PY
)
    printf '%-16s %-8s %22.0f %16.0f %16.2f\n' "$cfg" "$threads" "$loader" "$tps" "$wait"
  done
done
