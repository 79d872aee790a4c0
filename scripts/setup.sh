#!/usr/bin/env bash
# Installs what lmtrain needs on Debian 12, idempotently: only missing packages, saying which.
#   build:  compiler, CMake, Ninja, libtorch (CPU) + OpenBLAS (OpenMP), Gloo headers, yaml-cpp,
#           PCRE2, nlohmann-json, GoogleTest
#   data:   fortunes (the default demo corpus)
#   tools:  python3-torch (reference benchmarks, reference values, torchrun), openmpi-bin
#           (mpirun, to prove `mpirun -np N lmtrain train` works), iproute2 (the multi-node
#           test's network namespaces)
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libtorch-dev libopenblas0-openmp libgloo-dev
  libyaml-cpp-dev libpcre2-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  fortunes
  python3 python3-torch openmpi-bin iproute2
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "setup: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
echo "setup: done"
