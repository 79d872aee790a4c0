#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++ source differs from what clang-format makes of it
# (.clang-format: Google style, 100 columns). Fix with: clang-format -i FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "check_format: ${#bad[@]} file(s) not clang-formatted (run: clang-format -i ${bad[*]})" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ files clang-formatted"
