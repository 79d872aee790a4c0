#!/usr/bin/env bash
# The test suite: installs dependencies, builds, runs every test with ctest, then fuzzes each
# file reader for LMTRAIN_FUZZ_SECONDS (default 4: a smoke run after the committed regression
# inputs, which keeps the whole suite near 30 minutes on 2 cores; longer campaigns:
# scripts/fuzz.sh alone) under ASan + UBSan (scripts/fuzz.sh; about 3 minutes on 2 cores with
# its build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 tools/unity_name_clashes.py  # the unity build's batches would collide on these
bash scripts/check_format.sh
bash scripts/build.sh
cd "${LMTRAIN_BUILD_DIR:-build}"
ctest --output-on-failure -j2 --timeout 600
cd - >/dev/null
LMTRAIN_FUZZ_SECONDS=${LMTRAIN_FUZZ_SECONDS:-4} bash scripts/fuzz.sh
