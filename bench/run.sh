#!/usr/bin/env bash
# kvrt's CPU backend against PyTorch and against the memcpy roofline, in one
# run: verifies every op on every layout against torch, then times both next
# to memcpy, runs `kvrt bench --json` as a cross-check (its own rooflines:
# decode against a streaming read, moves against memcpy, same threads,
# sampled after every repetition), and rewrites the
# generated part of BENCHMARKS.md, bench/results/latest.{json,md} and
# bench/results/compare.svg.
#
#   bench/run.sh [--layout NAME ...] [--op OP ...] [--rounds N] [--no-doc] ...
#   bench/run.sh --help
#
# Needs the build (scripts/setup.sh) and Debian's PyTorch, which only
# /usr/bin/python3 sees:
#   apt-get install -y --no-install-recommends python3-torch python3-numpy
set -euo pipefail
cd "$(dirname "$0")/.."

py=/usr/bin/python3
case "${1:-}" in
  -h|--help) exec "$py" bench/compare.py --help ;;
esac
if [ ! -x "$py" ]; then
  echo "bench: error: $py not found: install python3 (Debian's python3-torch is only visible to it)" >&2
  exit 2
fi
if [ ! -x build/tools/kvrt ] || [ ! -e build/core/libkvrt.so ]; then
  echo "bench: error: the kvrt build is missing (build/tools/kvrt, build/core/libkvrt.so): run scripts/setup.sh first" >&2
  exit 2
fi
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "bench: error: PyTorch/NumPy are not importable by $py: install them with" >&2
  echo "    apt-get install -y --no-install-recommends python3-torch python3-numpy" >&2
  exit 2
fi
# On a shared machine OpenMP's default spin-waiting makes torch's parallel
# regions stall behind other jobs; passive waiting is torch's best case
# there.  kvrt's pool waits on condition variables and is not affected.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$py" bench/compare.py "$@"
