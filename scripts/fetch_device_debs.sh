#!/usr/bin/env bash
# Run HERE (the dev machine) before scripts/device_check.sh on the GPU machine: downloads the
# Debian -dev packages that machine lacks into .deb/ and prepares the fortunes corpus into
# .devdata/ (both git-ignored). Then name `.deb` and `.devdata` in the device run's carry list.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deb
(cd .deb && apt-get download libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libpcre2-dev \
  libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libgtest-dev libgmock-dev \
  libgloo-dev libgloo0 libzstd-dev zlib1g-dev libutf8proc-dev libutf8proc2)
if [[ ! -f .devdata/fortunes/prepare.json ]]; then
  mapfile -t files < <(find /usr/share/games/fortunes -maxdepth 1 -type f \
    ! -name '*.dat' ! -name '*.u8' | sort)
  build/lmtrain prepare --input "${files[@]}" --output .devdata/fortunes --vocab_size 8192 \
    --doc_separator %
fi
du -sh .deb .devdata
