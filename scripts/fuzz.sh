#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ into build-fuzz/ (clang-14, ASan + UBSan, no libtorch)
# and runs each one for a fixed budget on its committed seed corpus, after replaying its
# committed regression inputs. Fails on any crash, leak, timeout or sanitizer report, leaving
# the crashing input in build-fuzz/artifacts/<target>/.
#   LMTRAIN_FUZZ_SECONDS   budget per target in seconds (default 20)
#   LMTRAIN_FUZZ_TARGETS   space-separated subset of targets (default: all)
#   LMTRAIN_FUZZ_JOBS      targets run at once (default: the cores)
#   LMTRAIN_VENV           venv whose torch provides the headers interop/hf_format.h includes
# Prints one line per target: executions, corpus size, and the result.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${LMTRAIN_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${LMTRAIN_FUZZ_SECONDS:-20}
venv=${LMTRAIN_VENV:-$PWD/.venv}
clang=${LMTRAIN_FUZZ_CXX:-clang++-14}
command -v "$clang" >/dev/null || { echo "fuzz: $clang not found (apt-get install clang-14)" >&2; exit 2; }
torch_include=$("$venv/bin/python" -c \
  'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))') ||
  { echo "fuzz: no torch in $venv (run scripts/setup.sh)" >&2; exit 2; }

if [[ ! -f "$build_dir/build.ninja" ]]; then
  mkdir -p "$build_dir"
  cmake -S . -B "$build_dir" -G Ninja -DLMTRAIN_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_CXX_COMPILER=$clang" "-DLMTRAIN_TORCH_INCLUDE=$torch_include" \
    "-DLMTRAIN_ARROW_PYTHON=$venv/bin/python" \
    >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
fi
ninja -C "$build_dir"

all_targets=$(cd fuzz && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//' | tr '\n' ' ')
targets=${LMTRAIN_FUZZ_TARGETS:-$all_targets}
for t in $targets; do
  [[ " $all_targets " == *" $t "* ]] ||
    { echo "fuzz: LMTRAIN_FUZZ_TARGETS names '$t', which is not a target (they are: $all_targets)" >&2; exit 2; }
done
# The readers open paths, so each input is written to a file first: keep those in memory, in a
# scratch dir removed at exit.
scratch=$(mktemp -d "$([[ -w /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/lmtrain_fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target per core at a time (LMTRAIN_FUZZ_JOBS): each has its own work dir, log and
# artifacts, and writes its line to a file that is printed in the targets' order at the end.
jobs=${LMTRAIN_FUZZ_JOBS:-$(nproc)}
fuzz_one() {
  local t=$1
  local bin="$build_dir/fuzz/fuzz_$t" artifacts="$build_dir/artifacts/$t"
  local work="$build_dir/work/$t"  # new inputs go here; the committed corpus is only read
  local log="$build_dir/fuzz_$t.log" line="$build_dir/fuzz_$t.result"
  rm -rf "$work" "$line" && mkdir -p "$work" "$artifacts"
  if [[ -d fuzz/regressions/$t ]] && compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    if ! "$bin" -runs=1 fuzz/regressions/$t/* >"$log.regressions" 2>&1; then
      { echo "fuzz: $t: a committed regression input fails again (see $log.regressions)"
        tail -30 "$log.regressions"; } >"$line"
      return 1
    fi
  fi
  local result=ok
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
    result="FAILED (see $log; input in $artifacts/)"
  fi
  local execs corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(ls "fuzz/corpus/$t" | wc -l)
  printf 'fuzz: %-15s %10s executions in %ss, %3s seed(s): %s\n' "$t" "${execs:-?}" "$seconds" \
    "$corpus" "$result" >"$line"
  [[ $result == ok ]] && return 0
  grep -E "ERROR|FINDING|runtime error|SUMMARY" "$log" | head -5 >>"$line" || true
  return 1
}
failed=0
running=0
for t in $targets; do
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
for t in $targets; do
  if [[ -f "$build_dir/fuzz_$t.result" ]]; then
    if grep -q ': ok$' "$build_dir/fuzz_$t.result"; then cat "$build_dir/fuzz_$t.result"
    else cat "$build_dir/fuzz_$t.result" >&2; fi
  else
    echo "fuzz: $t: no result (the run died before writing it)" >&2
    failed=1
  fi
done
exit $failed
