#!/usr/bin/env bash
# SFT throughput with and without packing (data.chat.pack): assistant target tokens per second
# of one epoch, at 1 and 2 ranks (Gloo, 1 thread each), CPU, a small GPT-2 (4 layers, width 128).
#
# The conversations are generated (seeded): a user turn of 5-150 words and an answer of 3-80, so
# their lengths spread as a real chat set's do and one per row leaves most of a row padded.
# Target tokens per second = the epoch's assistant targets (chat.json's train count, times the
# share of the epoch's rows the whole steps cover) / the last step's elapsed_s. Prints one line
# per run, then the medians; quote figures only from an idle machine (it prints the load first).
#
# Usage: bench/chat_pack.sh [--rounds R] [--seq_len T]
# Env:   LMTRAIN_BIN (default build/lmtrain), PYTHON (default python3)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

rounds=3
seq_len=256
while (( $# > 0 )); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seq_len) seq_len="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
python=${PYTHON:-python3}
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
work="$(mktemp -d /tmp/lmtrain_chat_pack.XXXXXX)"
trap 'rm -rf "$work"' EXIT

"$python" - "$work" <<'PY'
import json, random, sys
w = sys.argv[1]
rng = random.Random(7)
words = ("the a old man sea ran big cat dog hill rock tree fast slow day night cold warm it was "
         "red blue green white black yellow apple sky grass snow coal sun what why how when").split()
say = lambda lo, hi: " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))
with open(w + "/corpus.txt", "w") as f:
    for _ in range(3000):
        f.write(say(20, 60) + "\n%\n")
with open(w + "/convs.jsonl", "w") as f:
    for _ in range(2400):
        m = [{"role": "user", "content": say(5, 150)}, {"role": "assistant", "content": say(3, 80)}]
        f.write(json.dumps({"messages": m}) + "\n")
PY
"$bin" prepare --input "$work/corpus.txt" --output "$work/base" --vocab_size 512 \
  --doc_separator % --chat_tokens --quiet >/dev/null
"$bin" prepare --chat --input "$work/convs.jsonl" --tokenizer "$work/base/tokenizer.json" \
  --output "$work/sft" --val_fraction 0.05 >/dev/null
targets=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['train']['targets'])" \
  "$work/sft/chat.json")
conversations=$("$python" -c \
  "import json,sys; print(json.load(open(sys.argv[1]))['train']['conversations'])" \
  "$work/sft/chat.json")
echo "train split: $conversations conversations, $targets assistant targets; seq_len $seq_len"
echo "load: $(busy_pct 2)% of all CPUs busy before the runs (other builders on this machine?)"

flags=(--config configs/gpt2-tiny.yaml --data.dir="$work/sft" --data.format=chat
       --data.seq_len="$seq_len" --train.micro_batch_size=8 --train.threads=1
       --train.epochs=1 --train.max_steps=0 --train.eval_every=0 --checkpoint.every=0
       --log.every=1 --optim.warmup_steps=5)
declare -A rates
for ((round = 1; round <= rounds; ++round)); do
  for ranks in 1 2; do
    for pack in false true; do
      run="$work/run_${ranks}_${pack}_$round"
      extra=()
      (( ranks > 1 )) && extra=(--nproc_per_node="$ranks" --dist.backend=gloo)
      out=$("$bin" train "${flags[@]}" "${extra[@]}" --data.chat.pack="$pack" \
        --train.total_batch_size=$((8 * 2 * seq_len)) --run.dir="$run" 2>&1) ||
        die "train failed: $out"
      rows=$conversations
      if [[ "$pack" == true ]]; then
        rows=$(sed -n 's/.*packed into \([0-9]*\) rows.*/\1/p' <<<"$out" | head -n 1)
      fi
      read -r steps secs < <("$python" -c '
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if "\"loss\"" in l][-1]
print(last["step"], last["elapsed_s"])' "$run/metrics.jsonl")
      # 16 rows per step (2 micro-batches of 8 on one rank, one on each of 2).
      rate=$("$python" -c "print(f'{$targets * min(1.0, $steps * 16 / $rows) / $secs:.0f}')")
      echo "round $round: ranks $ranks pack $pack: $rows rows, $steps steps, ${secs}s," \
        "$rate assistant targets/s"
      rates["$ranks.$pack"]+="$rate "
    done
  done
done
for ranks in 1 2; do
  for pack in false true; do
    # shellcheck disable=SC2086
    echo "median: ranks $ranks pack $pack: $(median ${rates["$ranks.$pack"]}) assistant targets/s"
  done
done
