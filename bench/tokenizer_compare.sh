#!/usr/bin/env bash
# Tokenizer speed (issue 28): lmtrain's BPE training and encoding side by side with Hugging Face
# `tokenizers` and tiktoken, on one deterministic corpus (bench/reference/tokenizer_compare.py
# corpus: MB megabytes of English-like JSONL documents from Debian's fortunes).
#   training  lmtrain `tokenize --train_vocab_size V --timing` (prepare's trainer: counting the
#             pre-tokens, then the merges) vs `tokenizers` BpeTrainer + ByteLevel (the same GPT-2
#             regex, the same number of merges), on 1 thread and on all threads
#   encoding  every document on its own, with lmtrain's trained vocabulary in all three
#             (`tokenizers` loads its tokenizer.json; tiktoken gets an Encoding built from it:
#             each token's bytes ranked by id, the same regex), on 1 thread and on all threads;
#             the ids of `tokenizers` and tiktoken are checked against lmtrain's, document by
#             document
# Every figure is the work alone (no reading of the corpus, no writing of results), the median of
# ROUNDS runs with the tools alternating (training: TRAIN_ROUNDS). Prints a Markdown table; the
# ids are checked on the first 1-thread round (the last column).
# Usage: bench/tokenizer_compare.sh [--mb MB] [--vocab "8192 32768"] [--rounds R]
#                                   [--train_rounds R] [--threads T]
#        (defaults: 100 MB, vocabularies 8192 and 32768, 3 rounds, 1 training round, T = cores)
# Env:   LMTRAIN_BIN (default build/lmtrain), LMTRAIN_VENV (default .venv; tiktoken comes from
#        scripts/requirements.txt), LMTRAIN_BENCH_DIR scratch dir (default
#        /tmp/lmtrain_tokenizer_compare; the corpus is reused if there)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
mb=100
vocabs="8192 32768"
rounds=3
train_rounds=1
threads=$(nproc)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --vocab) vocabs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --train_rounds) train_rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
done
bin=${LMTRAIN_BIN:-build/lmtrain}
python=${LMTRAIN_VENV:-.venv}/bin/python
dir=${LMTRAIN_BENCH_DIR:-/tmp/lmtrain_tokenizer_compare}
ref=bench/reference/tokenizer_compare.py
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
[[ -x "$python" ]] || die "no venv python at $python (run scripts/setup.sh)"
"$python" -c "import tokenizers, tiktoken" 2>/dev/null ||
  die "$python lacks tokenizers or tiktoken (pip install -r scripts/requirements.txt)"
mkdir -p "$dir"
corpus="$dir/corpus_${mb}.jsonl"
[[ -f "$corpus" ]] || "$python" "$ref" corpus "$corpus" --mb "$mb"

echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "versions: lmtrain $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $("$python" -c \
  'import tokenizers, tiktoken; print("tokenizers", tokenizers.__version__, "tiktoken", tiktoken.__version__)')"
echo "corpus: $corpus ($(du -mL "$corpus" | cut -f1) MB of JSONL); CPUs busy before: $(busy_pct 2)%"

rows=()
row() { rows+=("| $* |"); }
# med SCALE VALUES...: the median of the values divided by SCALE, with 2 decimals.
med() {
  local scale=$1
  shift
  printf '%s\n' "$@" | sort -g | awk -v s="$scale" '{ v[NR] = $1 / s }
    END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# lmtrain: the fields of its --timing line; the others: of the line they print.
lm_train() { "$bin" tokenize --train_vocab_size "$1" --input "$corpus" --output "$2" --timing 2>&1 >/dev/null | grep "train seconds"; }
hf_train() { env ${2:+RAYON_NUM_THREADS=$2} "$python" "$ref" train-hf "$corpus" --vocab_size "$1"; }
lm_encode() {  # VOCAB THREADS [IDS_OUT]
  "$bin" tokenize --tokenizer "$dir/lmtrain_$1.json" --input "$corpus" --documents --no_special \
    --threads "$2" --timing --output "${3:-/dev/null}" 2>&1 >/dev/null | grep "encode seconds"
}
py_encode() {  # TOOL VOCAB THREADS [--check IDS]
  env RAYON_NUM_THREADS="$3" "$python" "$ref" encode "$corpus" --tool "$1" \
    --tokenizer "$dir/lmtrain_$2.json" --threads "$3" "${@:4}"
}

for v in $vocabs; do
  echo "== vocabulary $v: training"
  declare -A secs=() mbs=() toks=() same=()
  for ((r = 1; r <= train_rounds; r++)); do
    l=$(lm_train "$v" "$dir/lmtrain_$v.json")
    echo "lmtrain: $l"
    secs[lm]+=" $(field seconds <<<"$l")"
    mbs[lm]+=" $(field MB_per_s <<<"$l")"
    for t in 1 "$threads"; do
      l=$(hf_train "$v" "$t")
      echo "tokenizers threads $t: $l"
      secs[hf$t]+=" $(field seconds <<<"$l")"
      mbs[hf$t]+=" $(field MB_per_s <<<"$l")"
    done
  done
  # shellcheck disable=SC2086
  row "train $v | lmtrain | 1 | $(med 1 ${secs[lm]}) | $(med 1 ${mbs[lm]}) | |"
  for t in 1 "$threads"; do
    # shellcheck disable=SC2086
    row "train $v | tokenizers | $t | $(med 1 ${secs[hf$t]}) | $(med 1 ${mbs[hf$t]}) | |"
  done

  echo "== vocabulary $v: encoding"
  secs=() mbs=() toks=() same=()
  ids="$dir/lmtrain_$v.ids"
  for ((r = 1; r <= rounds; r++)); do
    for t in 1 "$threads"; do
      l=$(lm_encode "$v" "$t" "$([[ $r == 1 && $t == 1 ]] && echo "$ids")")
      echo "lmtrain threads $t: $l"
      secs[lm$t]+=" $(field seconds <<<"$l")"
      mbs[lm$t]+=" $(field MB_per_s <<<"$l")"
      toks[lm$t]+=" $(field tokens_per_s <<<"$l")"
      [[ $t == 1 ]] && same[lm$t]="(reference)"
      for tool in hf tiktoken; do
        check=()
        [[ $r == 1 && $t == 1 ]] && check=(--check "$ids")
        l=$(py_encode "$tool" "$v" "$t" "${check[@]}")
        echo "$tool threads $t: $l"
        secs[$tool$t]+=" $(field seconds <<<"$l")"
        mbs[$tool$t]+=" $(field MB_per_s <<<"$l")"
        toks[$tool$t]+=" $(field tokens_per_s <<<"$l")"
        [[ $r == 1 && $t == 1 ]] && same[$tool$t]=$(sed -n 's/.*ids_identical: //p' <<<"$l")
      done
    done
  done
  for t in 1 "$threads"; do
    for tool in lm hf tiktoken; do
      name=$tool
      [[ $tool == lm ]] && name=lmtrain
      [[ $tool == hf ]] && name=tokenizers
      # shellcheck disable=SC2086
      row "encode $v | $name | $t | $(med 1 ${secs[$tool$t]}) | $(med 1 ${mbs[$tool$t]}) |" \
        "$(med 1e6 ${toks[$tool$t]}) | ${same[$tool$t]:-}"
    done
  done
  unset secs mbs toks same
done

echo
echo "| task, vocab | tool | threads | seconds | MB/s | M tokens/s | ids = lmtrain's |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "CPUs busy after: $(busy_pct 2)%"
