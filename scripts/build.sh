#!/usr/bin/env bash
# Configures and builds lmtrain into build/ (Release, Ninja, precompiled headers) against the
# libtorch of the venv scripts/setup.sh made (pip's torch 2.11: CPU and CUDA in one build).
#   LMTRAIN_VENV          the venv (default .venv)
#   LMTRAIN_TORCH_PREFIX  another libtorch's CMake prefix instead of the venv's
#   LMTRAIN_BUILD_DIR     build directory (default build)
# Extra arguments go to ninja (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${LMTRAIN_BUILD_DIR:-build}
venv=${LMTRAIN_VENV:-$PWD/.venv}
python="$venv/bin/python"
prefix=${LMTRAIN_TORCH_PREFIX:-}
if [[ -z "$prefix" ]]; then
  [[ -x "$python" ]] || { echo "build: no venv at $venv: run scripts/setup.sh first" >&2; exit 2; }
  prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
fi

# LMTRAIN_CMAKE_ARGS holds several arguments: split on blanks on purpose.
# shellcheck disable=SC2206
args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix"
  ${LMTRAIN_CMAKE_ARGS:-})
[[ -x "$python" ]] && args+=("-DLMTRAIN_PYTHON=$python")
if [[ ! -f "$build_dir/build.ninja" ]]; then
  echo "build: configuring $build_dir against libtorch at $prefix"
  mkdir -p "$build_dir"
  cmake "${args[@]}" >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }
fi
ninja -C "$build_dir" "$@"
