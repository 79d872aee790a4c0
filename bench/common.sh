# shellcheck shell=bash
# Shell helpers shared by the bench/ scripts (sourced, not run).

# die MESSAGE...: prints "<script>: error: MESSAGE" and exits 1.
die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 1
}

# gpu_bench_tools: sets `bin` (lmtrain: $LMTRAIN_BIN, default build/lmtrain) and `python` (the
# reference's: $PYTHON, default .venv/bin/python, else python3); dies when there is no binary.
gpu_bench_tools() {
  bin=${LMTRAIN_BIN:-build/lmtrain}
  python=${PYTHON:-}
  [[ -n "$python" ]] || { [[ -x .venv/bin/python ]] && python=.venv/bin/python || python=python3; }
  [[ -x "$bin" ]] || die "no lmtrain binary at $bin (run scripts/build.sh)"
}

# field NAME: the number after the last "NAME:" on stdin (a log prefix before it is fine).
field() {
  sed -n "s/.*$1:[[:space:]]*\([0-9][0-9.eE+-]*\).*/\1/p" | tail -n 1
}

# busy_pct SECONDS: percent of all CPUs busy over SECONDS, from /proc/stat (empty if n/a).
# Other sessions' processes may share these cores without showing up in `ps`.
busy_pct() {
  [[ -r /proc/stat ]] || return 0
  local a b
  a="$(head -n 1 /proc/stat)"
  sleep "$1"
  b="$(head -n 1 /proc/stat)"
  printf '%s\n%s\n' "$a" "$b" | awk '
    { idle[NR] = $5 + $6; tot[NR] = 0; for (i = 2; i <= NF; i++) tot[NR] += $i }
    END { dt = tot[2] - tot[1]; if (dt > 0) printf "%.0f", 100 * (1 - (idle[2] - idle[1]) / dt) }'
}

# median of the arguments (mean of the two middle values for an even count)
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) printf "%.1f", v[(NR + 1) / 2];
          else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ensure_fortunes BIN DIR: the fortunes corpus prepared into DIR (vocabulary 2048, one document
# per fortune) unless DIR already holds a tokenizer.json.
ensure_fortunes() {
  [[ -f "$2/tokenizer.json" ]] && return 0
  "$1" prepare --input /usr/share/games/fortunes --output "$2" --vocab_size 2048 \
    --doc_separator %
}
