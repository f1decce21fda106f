#!/bin/sh
# One bounded libFuzzer run as a TAP test with one point.
#
#   run-fuzzer.sh FUZZER TARGET CORPUS REGRESSIONS WORKDIR [DICT]
#
# The seed corpus is copied into WORKDIR (in the build tree), so the run may
# add inputs to its copy without touching the source tree; REGRESSIONS is
# read as a second, read-only corpus.  KVRT_FUZZ_SECONDS overrides the run
# time (15 s).  A crash is reported with the path of the saved input, which
# belongs in tests/fuzz/regressions/<target>/ once the bug is fixed.
set -u

fuzzer=$1 target=$2 corpus=$3 regressions=$4 work=$5 dict=${6:-}
seconds=${KVRT_FUZZ_SECONDS:-15}

echo "1..1"
rm -rf "$work"
if ! mkdir -p "$work/corpus" "$work/artifacts" || ! cp "$corpus"/* "$work/corpus/"; then
    echo "not ok 1 - $target: cannot set up $work from $corpus"
    exit 0
fi
set -- "$work/corpus"
[ -d "$regressions" ] && set -- "$@" "$regressions"
[ -n "$dict" ] && [ -f "$dict" ] && set -- "-dict=$dict" "$@"

# -rss_limit_mb also caps single allocations (malloc_limit_mb defaults to
# it): a request for gigabytes is a finding, not something to wait for.
# A fixed seed (KVRT_FUZZ_SEED, default 1) makes a CI run repeat the same
# mutations; KVRT_FUZZ_SEED=0 lets libFuzzer pick one for exploring by hand.
"$fuzzer" -seed="${KVRT_FUZZ_SEED:-1}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$@" > "$work/log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
if [ "$rc" -eq 0 ]; then
    echo "ok 1 - $target: ${runs:-?} inputs in ${seconds} s, no failure"
else
    echo "not ok 1 - $target: libFuzzer exited with status $rc"
    for f in "$work"/artifacts/*; do
        [ -e "$f" ] && echo "# saved input: $f (replay: $fuzzer $f)"
    done
    tail -n 60 "$work/log" | sed 's/^/# /'
fi
exit 0
