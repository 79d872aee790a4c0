#!/usr/bin/env bash
# Configures and builds lmtrain into build/ (Release, Ninja, precompiled headers).
# libtorch: Debian's libtorch-dev (CPU) unless a Python PyTorch built with CUDA is installed,
# in which case its libtorch is used. Override with LMTRAIN_TORCH_PREFIX=<cmake prefix path>.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${LMTRAIN_BUILD_DIR:-build}
prefix=${LMTRAIN_TORCH_PREFIX:-}
if [[ -z "$prefix" ]]; then
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    cuda_prefix=$("$py" -c 'import torch
if torch.version.cuda: print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
    if [[ -n "$cuda_prefix" ]]; then prefix=$cuda_prefix; break; fi
  done
fi

args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release)
if [[ -n "$prefix" ]]; then
  echo "build: using libtorch from $prefix"
  args+=("-DCMAKE_PREFIX_PATH=$prefix")
else
  echo "build: using Debian's libtorch (CPU)"
fi
if [[ ! -f "$build_dir/build.ninja" ]]; then cmake "${args[@]}" >/dev/null; fi
ninja -C "$build_dir" "$@"
