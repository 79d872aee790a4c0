#!/usr/bin/env bash
# Out-of-core `lmtrain prepare` at scale (issue 28): generates a corpus of GB gigabytes of JSONL
# (English-like documents from a 20k-word vocabulary, Zipf-distributed, split over 8 files; two
# of them zstd-compressed and one written as parquet by pyarrow), prepares it with a vocabulary
# of 8192 and --tokenizer_train_bytes 100 MB, and prints the peak RSS (/usr/bin/time) and the
# throughput of each phase (MB of input per second) from prepare's own log lines.
# Usage: bench/prepare_scale.sh [GB] [THREADS]   (default 2 GB, all cores)
# Env:   LMTRAIN_BIN (default build/lmtrain), LMTRAIN_VENV (default .venv),
#        LMTRAIN_BENCH_DIR scratch dir (default /tmp/lmtrain_prepare_scale; reused if there)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
gb=${1:-2}
threads=${2:-0}
bin=${LMTRAIN_BIN:-build/lmtrain}
python=${LMTRAIN_VENV:-.venv}/bin/python
dir=${LMTRAIN_BENCH_DIR:-/tmp/lmtrain_prepare_scale}
[[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
mkdir -p "$dir/corpus"
if [[ ! -f "$dir/done_$gb" ]]; then
  rm -rf "$dir/corpus" && mkdir -p "$dir/corpus"
  echo "generating $gb GB of JSONL into $dir/corpus"
  "$python" - "$dir/corpus" "$gb" <<'PY'
import json, os, random, subprocess, sys
import pyarrow as pa, pyarrow.parquet as pq
out, gb = sys.argv[1], float(sys.argv[2])
rng = random.Random(28)
letters = "etaoinshrdlcumwfgypbvkjxqz"
words = list({"".join(rng.choice(letters[: rng.randint(6, 26)]) for _ in range(rng.randint(1, 11)))
              for _ in range(30000)})[:20000]
weights = [1.0 / (i + 1) for i in range(len(words))]
per_file = int(gb * 1e9 / 8)
for f in range(8):
    jsonl = f"{out}/part_{f}.jsonl"
    writer = None
    size = 0
    while size < per_file:
        docs = []
        while len(docs) < 20000 and size < per_file:
            text = " ".join(rng.choices(words, weights, k=rng.randint(30, 800))).capitalize() + "."
            docs.append(text)
            size += len(text)
        if f == 7:  # parquet, a row group per batch of documents
            table = pa.table({"id": list(range(len(docs))), "text": docs})
            writer = writer or pq.ParquetWriter(f"{out}/part_7.parquet", table.schema,
                                                compression="zstd")
            writer.write_table(table)
        else:
            with open(jsonl, "a") as fh:
                fh.write("".join(json.dumps({"text": d}) + "\n" for d in docs))
    if writer:
        writer.close()
    elif f >= 5:
        subprocess.run(["zstd", "-q", "--rm", "-3", jsonl], check=True)
PY
  touch "$dir/done_$gb"
fi
du -sh "$dir/corpus"
rm -rf "$dir/out" "$dir/.out.partial"
/usr/bin/time -v "$bin" prepare --input "$dir/corpus" --output "$dir/out" --vocab_size 8192 \
  --threads "$threads" --progress_seconds 30 2>&1 | tee "$dir/prepare.log"
rss_kb=$(field "Maximum resident set size (kbytes)" <"$dir/prepare.log")
echo "peak RSS: $((rss_kb / 1024)) MiB"
grep -E "done in|encoded|trained BPE" "$dir/prepare.log"
