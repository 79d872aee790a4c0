#!/usr/bin/env bash
# Window-bounded KV caches (KvCache::window_keep), on the CPU: qwen3-tiny (6 layers, GQA 4/2,
# head_dim 64, block 1024) with sliding windows, briefly trained so that there is a checkpoint
# (the figures compare caches, not the model), generates --new tokens at batch 1 after a short
# prompt with each policy bounded by the windows and unbounded (window_bound=0): generation
# tokens/s, peak KV cache bytes, peak RSS, and whether the greedy tokens agree. Past the window
# the bounded cache of a windowed layer holds W - 1 tokens; the unbounded one grows with the
# sequence. The CPU share other processes took during the runs is printed with the table.
#
# Usage: bench/window_kv.sh [--windows LIST] [--new N] [--steps N] [--run DIR] [--repeats N]
#        (defaults: --windows 128 (every layer), --new 900, --steps 3, --repeats 3: the median
#        tokens/s of that many runs)
# Env:   LMTRAIN_BIN (default build/lmtrain), DATA (default data/fortunes), THREADS (default 1)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=common.sh
source "$repo_root/bench/common.sh"
windows=128 new=900 steps=3 run="" repeats=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --windows) windows=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "window_kv.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
data=${DATA:-data/fortunes}
threads=${THREADS:-1}
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
ensure_fortunes "$bin" "$data" >/dev/null
out=$(mktemp -d /tmp/lmtrain_window_kv.XXXXXX)
run=${run:-$out/run}
if [[ ! -d $run ]]; then
  "$bin" train --config configs/qwen3-tiny.yaml --model.windows="$windows" --data.seq_len=1024 \
    --train.micro_batch_size=1 --train.total_batch_size=1024 --train.max_steps="$steps" \
    --optim.warmup_steps=1 --data.dir="$data" --run.dir="$run" --checkpoint.every=0 \
    --train.eval_every=0 --train.threads="$threads" >"$out/train.log" 2>&1 ||
    { tail -20 "$out/train.log"; exit 1; }
fi
echo '{"id": 0, "prompt": "The quick brown fox jumps over the lazy dog."}' >"$out/prompt.jsonl"

# one POLICY TAG: "tokens/s peak_bytes rss_kib" of one generate run; ids in $out/TAG.jsonl.
one() {
  local policy=$1 tag=$2
  /usr/bin/time -f "%M" -o "$out/$tag.rss" "$bin" generate --checkpoint "$run" \
    --prompts "$out/prompt.jsonl" --batch_size 1 --temperature 0 --max_new_tokens "$new" \
    --stop_at_eot=false --print_ids --kv_cache="$policy" --threads "$threads" \
    --output "$out/$tag.jsonl" >"$out/$tag.log" 2>&1 || { tail -20 "$out/$tag.log"; exit 1; }
  echo "$(sed -n 's/.*= \([0-9.]*\) tokens\/s generated.*/\1/p' "$out/$tag.log") $(field 'peak cache bytes' <"$out/$tag.log") $(tail -1 "$out/$tag.rss")"
}

rows="$out/rows"
: >"$rows"
busy_before=$(busy_pct 2)
for policy in full int8 "h2o:budget=256,recent=128" "streaming:sinks=4,window=508"; do
  sep=$([[ $policy == *:* ]] && echo , || echo :)
  for bound in 1 0; do
    text=$policy
    [[ $bound == 0 ]] && text="$policy${sep}window_bound=0"
    tag="$(echo "$text" | tr -c 'a-zA-Z0-9\n' '_')"
    rates=()
    for ((r = 0; r < repeats; r++)); do
      read -r rate peak rss < <(one "$text" "$tag")
      rates+=("$rate")
    done
    printf '%s\t%s\t%s\t%s\t%s\n' "$text" "$(median "${rates[@]}")" "$peak" "$rss" \
      "$out/$tag.jsonl" >>"$rows"
  done
done
busy_after=$(busy_pct 2)
python3 - "$rows" "$windows" "$new" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print(f"\nqwen3-tiny, model.windows={sys.argv[2]}, {sys.argv[3]} new tokens at batch 1:")
print("| policy | tok/s (median) | peak KV cache KiB | peak RSS MiB | greedy tokens = unbounded |")
print("|---|---|---|---|---|")
for i, (text, rate, peak, rss, path) in enumerate(rows):
    ids = json.loads(open(path).readline())["ids"]
    pair = json.loads(open(rows[i + 1 - 2 * (i % 2)][4]).readline())["ids"]
    same = "yes" if ids == pair else f"first {next(j for j, (a, b) in enumerate(zip(ids, pair)) if a != b)}"
    print(f"| `{text}` | {float(rate):.0f} | {int(peak) / 1024:.0f} | {int(rss) / 1024:.0f} | {same} |")
PY
echo "other load: ${busy_before:-?}% of all CPUs busy just before, ${busy_after:-?}% just after"
echo "runs in $out"
