#!/usr/bin/env bash
# KV cache policies side by side for trained models, on the CPU: for every policy, the cache
# bytes per token and the validation perplexity against the full cache (`lmtrain eval
# --kv_cache`, teacher-forced token by token), generation tokens/s at batch 1 (16 prompts of
# different lengths) and batch 16 (16 copies of one prompt, so that every policy fills the
# batch; streaming and h2o cannot left-pad), the peak KV cache bytes and peak RSS of those runs,
# and the greedy agreement with the full cache over the first 64 new tokens (mean share of each
# prompt's tokens before its first difference). Then a streaming run of 4 x block_size new
# tokens, whose peak cache bytes stay at S + W tokens.
#
# Models: (a) gpt2-tiny trained --steps steps on the fortunes corpus (block 256, windows of
# 128); (b) qwen3-tiny (RoPE, GQA, QK-norm, block 1024) trained --qwen_steps steps on windows
# of 1024 (a brief run: the figures compare policies, not the model). --skip_qwen leaves (b) out.
#
# Usage: bench/compare_kv.sh [--steps N] [--qwen_steps N] [--skip_gpt2] [--skip_qwen] [--gpt2_run DIR]
#        [--qwen_run DIR]   (--*_run: measure that trained run instead of training one)
# Env:   LMTRAIN_BIN (default build/lmtrain), DATA (default data/fortunes, prepared if missing),
#        THREADS (default 1: decoding a tiny model is latency-bound, and a second OpenMP thread
#        on a shared 2-core machine spins more than it helps)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=common.sh
source "$repo_root/bench/common.sh"
steps=300 qwen_steps=40 skip_gpt2=0 skip_qwen=0 gpt2_run="" qwen_run=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --qwen_steps) qwen_steps=$2; shift 2 ;;
    --skip_gpt2) skip_gpt2=1; shift ;;
    --skip_qwen) skip_qwen=1; shift ;;
    --gpt2_run) gpt2_run=$2; shift 2 ;;
    --qwen_run) qwen_run=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "compare_kv.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
data=${DATA:-data/fortunes}
threads=${THREADS:-1}
new_tokens=64
ensure_fortunes "$bin" "$data" >/dev/null
out=$(mktemp -d /tmp/lmtrain_compare_kv.XXXXXX)

# Prompts: the first lines of 16 fortunes (ragged lengths), and 16 copies of the first one.
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
text = open("/usr/share/games/fortunes/fortunes", errors="replace").read()
fortunes = [f.strip() for f in text.split("\n%\n") if f.strip()]
picked = [" ".join(f.split("\n")[: 1 + i % 3]) for i, f in enumerate(fortunes[:16])]
with open(out + "/ragged.jsonl", "w") as f:
    for i, p in enumerate(picked):
        f.write(json.dumps({"id": i, "prompt": p}) + "\n")
with open(out + "/same.jsonl", "w") as f:
    for i in range(16):
        f.write(json.dumps({"id": i, "prompt": picked[0]}) + "\n")
PY

train() {  # run dir, lmtrain train args...
  local run=$1
  shift
  "$bin" train "$@" --data.dir="$data" --run.dir="$run" --checkpoint.every=0 \
    --train.eval_every=0 --train.threads="$threads" >"$run.log" 2>&1 || { tail -20 "$run.log"; exit 1; }
}

# generate_run LABEL RUN POLICY FILE BATCH NEW: appends "LABEL tokens/s peak_bytes rss_kib".
generate_run() {
  local label=$1 run=$2 policy=$3 file=$4 batch=$5 new=$6
  local log="$out/$label.log"
  /usr/bin/time -f "%M" -o "$out/$label.rss" "$bin" generate --checkpoint "$run" \
    --prompts "$file" --batch_size "$batch" --temperature 0 --max_new_tokens "$new" \
    --stop_at_eot=false --print_ids --kv_cache="$policy" --threads "$threads" \
    --output "$out/$label.jsonl" >"$log" 2>&1 || { tail -20 "$log"; exit 1; }
  echo "$(sed -n 's/.*= \([0-9.]*\) tokens\/s generated.*/\1/p' "$log") $(field 'peak cache bytes' <"$log") $(tail -1 "$out/$label.rss")"
}

# compare MODEL RUN EVAL_BATCHES EVAL_BATCH POLICY...: one table row per policy.
compare() {
  local model=$1 run=$2 eval_batches=$3 eval_batch=$4
  shift 4
  local rows="$out/$model.rows"
  : >"$rows"
  for policy in "$@"; do
    local tag
    tag="$model.$(echo "$policy" | tr -c 'a-zA-Z0-9\n' '_')"
    "$bin" eval --checkpoint "$run" --kv_cache="$policy" --batches "$eval_batches" \
      --batch_size "$eval_batch" --threads "$threads" >"$out/$tag.eval" 2>&1 ||
      { tail -20 "$out/$tag.eval"; exit 1; }
    local line
    line=$(grep -F "kv_cache $policy:" "$out/$tag.eval" | tail -n 1)  # full's own line is first
    local b1 b16
    b1=$(generate_run "$tag.b1" "$run" "$policy" "$out/ragged.jsonl" 1 "$new_tokens")
    b16=$(generate_run "$tag.b16" "$run" "$policy" "$out/same.jsonl" 16 "$new_tokens")
    printf '%s\t%s\t%s\t%s\t%s\n' "$policy" "$line" "$b1" "$b16" "$out/$tag.b1.jsonl" >>"$rows"
  done
  python3 - "$rows" "$model" <<'PY'
import json, re, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def ids(path):
    return [json.loads(l)["ids"] for l in open(path)]
full = ids(rows[0][4])
print(f"\n{sys.argv[2]}:")
print("| policy | cache bytes/token | val ppl | ppl vs full | tok/s b1 | tok/s b16 | peak cache KiB (b16) | peak RSS MiB (b16) | greedy agreement @64 |")
print("|---|---|---|---|---|---|---|---|---|")
for policy, line, b1, b16, path in rows:
    m = re.search(r"perplexity ([0-9.]+) \(([+-][0-9.]+)% vs full\), ([0-9]+) cache bytes/token", line)
    ppl, delta, bpt = m.group(1), m.group(2), m.group(3)
    t1 = b1.split()[0]
    t16, peak16, rss16 = b16.split()
    agree = []
    for a, b in zip(full, ids(path)):
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        agree.append(n / max(1, len(a)))
    print(f"| `{policy}` | {bpt} | {ppl} | {delta}% | {float(t1):.0f} | {float(t16):.0f} | "
          f"{int(peak16) / 1024:.0f} | {int(rss16) / 1024:.0f} | {100 * sum(agree) / len(agree):.0f}% |")
PY
}

# long_run MODEL RUN BLOCK STREAMING: peak cache bytes of 4 x block_size new tokens (streaming)
# against the full cache's at block_size.
long_run() {
  local model=$1 run=$2 block=$3 streaming=$4
  head -1 "$out/ragged.jsonl" >"$out/one.jsonl"
  local f s
  f=$(generate_run "$model.long_full" "$run" full "$out/one.jsonl" 1 "$block")
  s=$(generate_run "$model.long_stream" "$run" "$streaming" "$out/one.jsonl" 1 $((4 * block)))
  python3 - "$model" "$block" "$streaming" "$f" "$s" "$out/$model.long_full.jsonl" "$out/$model.long_stream.jsonl" <<'PY'
import json, sys
model, block, streaming, f, s = sys.argv[1:6]
nf = json.loads(open(sys.argv[6]).readline())["tokens"]
ns = json.loads(open(sys.argv[7]).readline())["tokens"]
f, s = f.split(), s.split()
print(f"{model}: full cache, {nf} new tokens (to block_size {block}): peak cache {int(f[1]) / 1024:.0f} KiB, "
      f"peak RSS {int(f[2]) / 1024:.0f} MiB, {float(f[0]):.0f} tok/s")
print(f"{model}: {streaming}, {ns} new tokens (4 x block_size): peak cache {int(s[1]) / 1024:.0f} KiB, "
      f"peak RSS {int(s[2]) / 1024:.0f} MiB, {float(s[0]):.0f} tok/s")
PY
}

if [[ $skip_gpt2 == 0 ]]; then
gpt2_run=${gpt2_run:-$out/gpt2}
echo "== (a) gpt2-tiny, $steps steps on fortunes ($gpt2_run)"
[[ -d $gpt2_run ]] || train "$gpt2_run" --config configs/gpt2-tiny.yaml --train.max_steps="$steps"
compare gpt2-tiny "$gpt2_run" 4 8 full int8 int4 "streaming:sinks=4,window=60" \
  "streaming:sinks=4,window=60+int8:group=16,residual=16" "h2o:budget=64,recent=32"
long_run gpt2-tiny "$gpt2_run" 256 "streaming:sinks=4,window=60+int8:group=16,residual=16"
fi

if [[ $skip_qwen == 0 ]]; then
  qwen_run=${qwen_run:-$out/qwen3}
  echo "== (b) qwen3-tiny, block 1024, $qwen_steps steps on windows of 1024 ($qwen_run)"
  [[ -d $qwen_run ]] || train "$qwen_run" --config configs/qwen3-tiny.yaml --data.seq_len=1024 \
    --train.micro_batch_size=2 --train.total_batch_size=2048 --train.max_steps="$qwen_steps" \
    --optim.warmup_steps=5
  compare qwen3-tiny "$qwen_run" 1 2 full int8 int4 "streaming:sinks=4,window=252" \
    "streaming:sinks=4,window=252+int8" "h2o:budget=256,recent=128"
  long_run qwen3-tiny "$qwen_run" 1024 "streaming:sinks=4,window=252+int8"
fi
echo "runs in $out"
