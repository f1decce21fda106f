#!/usr/bin/env bash
# The test suite: set-up, build, then the tests through meson.
#   scripts/test.sh [--all | --slow | --asan | --tsan | --valgrind | --fuzz] [meson test arguments...]
#     (no flag)   build/       the default run: every suite but `slow` (README: a
#                              few minutes on two cores)
#     --all       build/       everything: the default run and suite slow (lint,
#                              static analysis, the install test, the long fault
#                              runs), `--setup all`
#     --slow      build/       only suite slow, what the default run leaves out
#                              (its log: build/meson-logs/testlog-slow.json)
#     --asan      build-asan/  gcc ASan + UBSan build, `--setup asan`
#     --tsan      build-tsan/  clang ThreadSanitizer build, `--setup tsan`
#     --valgrind  build/       the default build under memcheck, `--setup valgrind`
#     --fuzz      build-fuzz/  clang libFuzzer build, the bounded `fuzz` suite
set -uo pipefail
cd "$(dirname "$0")/.."
mode=default
case "${1:-}" in
  --all|--slow|--asan|--tsan|--valgrind|--fuzz) mode=${1#--}; shift ;;
esac
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

case $mode in
  default)
    bash scripts/setup.sh build || exit 1
    # the suite's own wall time, apart from set-up and build (README)
    start=$SECONDS
    meson test -C build --print-errorlogs --num-processes 2 "$@"
    rc=$?
    echo "scripts/test.sh: the default suite ran in $((SECONDS - start)) s" >&2
    exit $rc ;;
  all)
    bash scripts/setup.sh build || exit 1
    exec meson test -C build --setup all --print-errorlogs --num-processes 2 "$@" ;;
  slow)
    bash scripts/setup.sh build || exit 1
    exec meson test -C build --suite slow --logbase testlog-slow --print-errorlogs --num-processes 2 "$@" ;;
  valgrind)
    bash scripts/setup.sh build || exit 1
    exec meson test -C build --setup valgrind --print-errorlogs --num-processes 2 "$@" ;;
  asan)
    # GPU modules are left out: without a device their code cannot run, and
    # the default build already compiles them.
    CC=gcc CXX=g++ bash scripts/setup.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=disabled -Drocm=disabled || exit 1
    exec meson test -C build-asan --setup asan --print-errorlogs --num-processes 2 "$@" ;;
  fuzz)
    command -v clang >/dev/null || { echo "scripts/test.sh --fuzz needs clang" >&2; exit 1; }
    CC=clang CXX=clang++ bash scripts/setup.sh build-fuzz -Dfuzzers=enabled -Dopencl=disabled \
      -Dcuda=disabled -Drocm=disabled || exit 1
    exec meson test -C build-fuzz --suite fuzz --print-errorlogs --num-processes 2 "$@" ;;
  tsan)
    command -v clang >/dev/null || { echo "scripts/test.sh --tsan needs clang" >&2; exit 1; }
    CC=clang CXX=clang++ bash scripts/setup.sh build-tsan -Db_sanitize=thread -Db_lundef=false \
      -Dcuda=disabled -Drocm=disabled || exit 1
    exec meson test -C build-tsan --setup tsan --print-errorlogs --num-processes 2 "$@" ;;
esac
