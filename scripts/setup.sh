#!/usr/bin/env bash
# Installs what lmtrain needs on Debian 12, idempotently, saying what it installs:
#   Debian:  compiler, CMake, Ninja, Gloo headers (pip's torch ships none), yaml-cpp, PCRE2,
#            utf8proc (tokenizer normalizers), zstd + zlib
#            (compressed corpora), nlohmann-json, GoogleTest; fortunes (the demo
#            corpus); openmpi-bin (mpirun tests), iproute2 (the multi-node test's network namespaces); clang-14 + libclang-rt-14-dev
#            (libFuzzer, ASan, UBSan for scripts/fuzz.sh); clang-format (scripts/check_format.sh);
#            chromium-headless-shell (the report's and the chat page's real-browser tests render
#            the pages with it); cpp-httplib (`lmtrain serve`'s HTTP server);
#            python3-venv
#   PyPI:    scripts/requirements.txt into .venv/ (torch 2.11 = the libtorch we build against,
#            plus transformers, tokenizers, safetensors, tensorboard, peft for the tests)
# LMTRAIN_VENV overrides the venv's place (default: .venv in the repo).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake ninja-build pkg-config
  libgloo-dev libyaml-cpp-dev libpcre2-dev libutf8proc-dev libzstd-dev zlib1g-dev nlohmann-json3-dev
  libgtest-dev
  libgmock-dev
  fortunes openmpi-bin iproute2
  clang-14 libclang-rt-14-dev clang-format
  chromium-headless-shell
  libcpp-httplib-dev
)
python_ok() { python3 -c 'import venv, ensurepip' >/dev/null 2>&1; }
python_ok || packages+=(python3 python3-venv)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} Debian packages already installed"
else
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
fi

venv=${LMTRAIN_VENV:-$PWD/.venv}
stamp="$venv/.lmtrain-requirements"
if [[ -f "$stamp" ]] && cmp -s "$stamp" scripts/requirements.txt; then
  echo "setup: $venv is up to date with scripts/requirements.txt"
  exit 0
fi
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
echo "setup: pip installing scripts/requirements.txt into $venv (torch with its CUDA libraries: ~5 GB, a few minutes)"
start=$SECONDS
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
cp scripts/requirements.txt "$stamp"
echo "setup: pip done in $((SECONDS - start)) s"
