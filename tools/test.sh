#!/usr/bin/env bash
# The whole test suite: set-up, build, then every test through meson.
#   tools/test.sh [meson test arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh build || exit 1
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
meson test -C build --print-errorlogs --num-processes 2 "$@"
