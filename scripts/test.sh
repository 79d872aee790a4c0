#!/usr/bin/env bash
# The test suite: installs dependencies, builds, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${LMTRAIN_BUILD_DIR:-build}"
ctest --output-on-failure -j2 --timeout 600
