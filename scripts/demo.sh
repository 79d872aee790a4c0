#!/usr/bin/env bash
# The demo: prepares the default corpus (Debian's fortunes), trains gpt2-tiny on CPU with two
# data-parallel ranks (`lmtrain launch`, Gloo over loopback), then prints the validation loss
# and generated samples, and writes the run's report page (RUN/report.html, printed last). About
# 5 minutes on 2 cores. LMTRAIN_DEMO_RANKS changes the rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh lmtrain

data=data/prepared/fortunes
run=${LMTRAIN_DEMO_RUN:-runs/demo}
if [[ ! -f "$data/prepare.json" ]]; then
  mapfile -t files < <(find /usr/share/games/fortunes -maxdepth 1 -type f \
    ! -name '*.dat' ! -name '*.u8' | sort)
  echo "== prepare: ${#files[@]} fortune files -> $data"
  build/lmtrain prepare --input "${files[@]}" --output "$data" --vocab_size 2048 \
    --doc_separator %
fi

ranks=${LMTRAIN_DEMO_RANKS:-2}
echo "== train: gpt2-tiny on $ranks ranks -> $run"
# --overwrite: an earlier demo run moves aside into $run/previous-<n>/, nothing is deleted.
build/lmtrain launch --standalone --nproc_per_node="$ranks" -- \
  train --config configs/gpt2-tiny.yaml --data.dir="$data" --run.dir="$run" --overwrite "$@"

echo "== eval"
build/lmtrain eval --checkpoint "$run"

echo "== sample (prompt: \"The secret of life is\")"
build/lmtrain generate --checkpoint "$run/checkpoints/latest" --prompt "The secret of life is" \
  --max_new_tokens 80 --temperature 0.8 --top_k 40 --seed 42 --num_samples 3

echo "== report"
build/lmtrain report "$run"
echo "open $run/report.html in a browser: charts of every metric and a summary of the run"
