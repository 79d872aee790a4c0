#!/usr/bin/env bash
# Carrying a build to the GPU machine, so that its minutes go to measuring, not compiling
# (issue 39: a fresh machine and `first`'s build took 119 s of the 900 a session has).
#
# HERE, before the device call:  bash scripts/device_prebuilt.sh
#   builds lmtrain and lmtrain_cuda_tests as `first` builds them there (parquet input and the
#   server off, sm_90 only) into build-prebuilt/, without a RUNPATH, so they find libtorch only
#   through LD_LIBRARY_PATH, here as there, and copies them with a manifest into .prebuilt/
#   (git-ignored, about 20 MB). Name `.prebuilt` in the device call's carry list.
# THERE, sourced by scripts/device_check.sh:  use_prebuilt PYTHON DEPS
#   returns 0 when the carried binaries fit the tree and the torch there and run there: they are
#   then in build/ (build/lmtrain, build/tests/lmtrain_cuda_tests) with a CTest file listing the
#   GPU tests, as a build would leave them. Otherwise returns 1 with the reason in $prebuilt_why,
#   and the caller builds as before.

# Why use_prebuilt returned 1, for the caller's summary.
export prebuilt_why=""

# torch_facts PYTHON: two lines from one import of PYTHON's torch (a second or two each): its
# version, then the folders a binary linked against it loads from (torch/lib, and the
# nvidia/*/lib folders of the CUDA wheels: cudart, cuBLAS, cuDNN, NCCL), joined by ':'.
torch_facts() {
  "$1" - <<'EOF'
import glob, os, torch
print(torch.__version__)
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs = [lib] + sorted(d for d in glob.glob(os.path.join(site, "nvidia", "**", "lib"), recursive=True)
                      if glob.glob(os.path.join(d, "*.so*")))
print(":".join(dirs))
EOF
}

# source_fingerprint: one hash of everything the binaries are built from, the same on both
# machines (the device gets a copy of the working tree, perhaps without .git).
source_fingerprint() {
  find CMakeLists.txt src tests -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-16
}

use_prebuilt() {
  local python=$1 deps=$2 want have missing
  prebuilt_why=""
  if [[ ! -f .prebuilt/manifest.txt ]]; then
    prebuilt_why="none carried"
    return 1
  fi
  want=$(sed -n 's/^sources: //p' .prebuilt/manifest.txt)
  have=$(source_fingerprint)
  if [[ "$want" != "$have" ]]; then
    prebuilt_why="built from other sources (manifest $want, tree $have)"
    return 1
  fi
  local facts
  # stdout only: a warning on stderr must not shift the two lines.
  if ! facts=$(torch_facts "$python" 2>/dev/null); then
    prebuilt_why="no torch from $python: $("$python" -c 'import torch' 2>&1 | tail -3)"
    return 1
  fi
  want=$(sed -n 's/^torch: //p' .prebuilt/manifest.txt)
  have=$(sed -n 1p <<<"$facts")
  if [[ "$want" != "$have" ]]; then
    prebuilt_why="built against torch $want, this python has $have"
    return 1
  fi
  LD_LIBRARY_PATH=$(sed -n 2p <<<"$facts"):$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  missing=$(ldd .prebuilt/lmtrain .prebuilt/lmtrain_cuda_tests 2>&1 | grep 'not found' | sort -u |
    tr -s ' \t\n' ' ')
  if [[ -n "$missing" ]]; then
    prebuilt_why="libraries not found: $missing"
    return 1
  fi
  local version list
  if ! version=$(.prebuilt/lmtrain --version 2>&1); then
    prebuilt_why="lmtrain --version failed: $(head -3 <<<"$version")"
    return 1
  fi
  if ! list=$(.prebuilt/lmtrain_cuda_tests --gtest_list_tests 2>&1); then
    prebuilt_why="lmtrain_cuda_tests --gtest_list_tests failed: $(head -3 <<<"$list")"
    return 1
  fi
  mkdir -p build/tests
  cp .prebuilt/lmtrain build/lmtrain
  cp .prebuilt/lmtrain_cuda_tests build/tests/lmtrain_cuda_tests
  # The paths the test binary had compiled in are this machine's no longer (tests/test_util.cpp).
  export LMTRAIN_TEST_BINARY=$PWD/build/lmtrain LMTRAIN_TEST_SOURCE_DIR=$PWD LMTRAIN_TEST_PYTHON=$python
  write_ctest_file "$list" >build/CTestTestfile.cmake
  return 0
}

# write_ctest_file LIST: a CTest file with one entry per GPU test of `--gtest_list_tests`'s LIST,
# with the properties tests/CMakeLists.txt gives them (skips recognised, OMP_NUM_THREADS=4).
write_ctest_file() {
  local binary=$PWD/build/tests/lmtrain_cuda_tests suite="" line name
  local env="OMP_NUM_THREADS=4;LMTRAIN_TEST_BINARY=$LMTRAIN_TEST_BINARY"
  env+=";LMTRAIN_TEST_SOURCE_DIR=$LMTRAIN_TEST_SOURCE_DIR;LMTRAIN_TEST_PYTHON=$LMTRAIN_TEST_PYTHON"
  echo "# Written by scripts/device_prebuilt.sh from the carried lmtrain_cuda_tests"
  while IFS= read -r line; do
    line=${line%%#*}
    line=${line%"${line##*[![:space:]]}"}
    [[ -z "$line" ]] && continue
    if [[ "$line" != " "* ]]; then
      suite=$line
      continue
    fi
    name=$suite${line##* }
    echo "add_test([=[$name]=] \"$binary\" \"--gtest_filter=$name\" --gtest_also_run_disabled_tests)"
    echo "set_tests_properties([=[$name]=] PROPERTIES WORKING_DIRECTORY \"$PWD/build/tests\"" \
      "SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==] ENVIRONMENT \"$env\" LABELS lmtrain_cuda_tests)"
  done <<<"$1"
}

# ---- here: build and copy (only when run, not when sourced)
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  venv=${LMTRAIN_VENV:-$PWD/.venv}
  python=$venv/bin/python
  [[ -x "$python" ]] || { echo "device_prebuilt: no venv at $venv: run scripts/setup.sh" >&2; exit 2; }
  # Ignored files would enter the hash here but not travel: the binaries would be refused there.
  if git status --short --ignored CMakeLists.txt src tests 2>/dev/null | grep '^!!'; then
    echo "device_prebuilt: the ignored files above would make the fingerprint differ there" >&2
    exit 1
  fi
  facts=$(torch_facts "$python")
  # Discovery runs the test binary after its link, and without a RUNPATH it needs the path.
  LD_LIBRARY_PATH=$(sed -n 2p <<<"$facts") LMTRAIN_VENV=$venv LMTRAIN_BUILD_DIR=build-prebuilt \
    LMTRAIN_CMAKE_ARGS="-DLMTRAIN_PARQUET=OFF -DLMTRAIN_SERVE=OFF -DLMTRAIN_CUDA_ARCHITECTURES=90 -DCMAKE_SKIP_RPATH=ON" \
    bash scripts/build.sh lmtrain lmtrain_cuda_tests
  mkdir -p .prebuilt
  cp build-prebuilt/lmtrain build-prebuilt/tests/lmtrain_cuda_tests .prebuilt/
  {
    echo "sources: $(source_fingerprint)"
    echo "torch: $(sed -n 1p <<<"$facts")"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    # shellcheck disable=SC1091
    echo "built: $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  } >.prebuilt/manifest.txt
  cat .prebuilt/manifest.txt
  du -sh .prebuilt
fi
