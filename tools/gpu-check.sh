#!/usr/bin/env bash
# One-shot check of the GPU backends on a machine with a GPU (or without:
# then the device tests report SKIP with the driver's reason).
#
#   tools/gpu-check.sh [build-dir]        (default: build-gpu-check)
#
# 1. configure a release build with CUDA required (-Dcuda=enabled: the debug
#    buildtype would add nvcc -G), 2. build, 3. run the gpu test suite, then,
#    where they exist, 4. the conformance suite on the CUDA backend and
#    5. `kvrt bench --backend cuda --json`.  Prints one summary block and
#    exits non-zero on any failure.  Each step has a time limit so the whole
#    run stays under 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build-gpu-check}
LOGS="$BUILD-logs" # beside the build dir: meson wants that one to itself
START=$(date +%s)
mkdir -p "$LOGS"
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

declare -a SUMMARY=()
FAILED=0
note() { SUMMARY+=("$1"); echo "== $1"; }
fail() { FAILED=1; note "FAIL: $1"; }

# Sum a meson test log (one JSON object per line) into "N passed, ..."
# and list every test that did not pass, with a skip reason where TAP gave one.
summarise_log() {
    local json=$1 txt=$2
    if [ ! -s "$json" ]; then
        echo "no results"
        return
    fi
    local ok fail skip other
    ok=$(grep -c '"result": "OK"' "$json")
    fail=$(grep -Ec '"result": "(FAIL|ERROR|TIMEOUT|UNEXPECTEDPASS)"' "$json")
    skip=$(grep -Ec '"result": "(SKIP|EXPECTEDFAIL)"' "$json")
    other=$(( $(wc -l < "$json") - ok - fail - skip ))
    echo "$ok passed, $fail failed, $skip skipped$([ "$other" -gt 0 ] && echo ", $other other")"
    grep -Eo '"name": "[^"]*", [^{]*"result": "(FAIL|ERROR|TIMEOUT|UNEXPECTEDPASS)"' "$json" |
        sed -E 's/"name": "([^"]*)".*"result": "([A-Z]*)"/    \2 \1/'
    if [ -f "$txt" ]; then
        grep -Eo '1\.\.0 # SKIP .*' "$txt" | sed 's/^1\.\.0 # SKIP /    skip: /' | sort -u
    fi
    [ "$fail" -eq 0 ]
}

remaining() { echo $(( 480 - ($(date +%s) - START) )); }

# 1. configure
if [ -f "$BUILD/build.ninja" ]; then
    setup=(meson setup --reconfigure "$BUILD" -Dcuda=enabled -Dbuildtype=release)
else
    setup=(meson setup "$BUILD" -Dcuda=enabled -Dbuildtype=release)
fi
if ! timeout 120 "${setup[@]}" > "$LOGS/setup.log" 2>&1; then
    tail -20 "$LOGS/setup.log"
    fail "configure (${setup[*]}); log: $LOGS/setup.log"
else
    note "configure: release build with CUDA in $BUILD"
    grep -E "^ *(cuda|rocm|opencl|cpu) *: " "$LOGS/setup.log" || true
fi

# 2. build
if [ "$FAILED" -eq 0 ]; then
    if timeout 240 ninja -C "$BUILD" > "$LOGS/build.log" 2>&1; then
        note "build: ok ($(( $(date +%s) - START )) s so far)"
    else
        grep -E "error|FAILED" "$LOGS/build.log" | head -20
        fail "build; log: $LOGS/build.log"
    fi
fi

# 3. the GPU tests (descriptor, device checks per backend, planner)
if [ "$FAILED" -eq 0 ]; then
    timeout $(( $(remaining) < 150 ? $(remaining) : 150 )) \
        meson test -C "$BUILD" --suite gpu --print-errorlogs --logbase gpu-check-gpu \
        > "$LOGS/gpu-tests.log" 2>&1
    if line=$(summarise_log "$BUILD/meson-logs/gpu-check-gpu.json" \
                            "$BUILD/meson-logs/gpu-check-gpu.txt"); then
        note "gpu tests: $line"
    else
        fail "gpu tests: $line"
    fi
fi

# 4. the conformance suite on the CUDA backend, where the tree has it
if [ "$FAILED" -eq 0 ] || [ -f "$BUILD/build.ninja" ]; then
    # Not `| grep -q`: with pipefail, grep quitting early fails the pipeline.
    tests=$(meson test -C "$BUILD" --list 2>/dev/null)
    if grep -q 'conformance-cuda$' <<< "$tests"; then
        timeout $(( $(remaining) < 150 ? $(remaining) : 150 )) \
            meson test -C "$BUILD" conformance-cuda --print-errorlogs --logbase gpu-check-conf \
            > "$LOGS/conformance.log" 2>&1
        if line=$(summarise_log "$BUILD/meson-logs/gpu-check-conf.json" \
                                "$BUILD/meson-logs/gpu-check-conf.txt"); then
            note "conformance (cuda): $line"
        else
            fail "conformance (cuda): $line"
        fi
    else
        note "conformance (cuda): not in this tree (no conformance-cuda test)"
    fi
fi

# 5. the benchmark, where the CLI has one
KVRT="$BUILD/tools/kvrt"
no_cuda=$(grep -E '"name": "([^"]* / )?cuda-device"' "$BUILD/meson-logs/gpu-check-gpu.json" 2>/dev/null |
          grep -c '"result": "SKIP"')
if [ "${no_cuda:-0}" -gt 0 ]; then
    note "bench (cuda): skipped, no CUDA device (see the gpu tests' skip reason)"
elif [ -x "$KVRT" ] && "$KVRT" bench --help > /dev/null 2>&1; then
    if timeout $(( $(remaining) < 90 ? $(remaining) : 90 )) \
            "$KVRT" bench --backend cuda --json > "$LOGS/bench.json" 2> "$LOGS/bench.err"; then
        note "bench (cuda): $LOGS/bench.json ($(wc -c < "$LOGS/bench.json") bytes)"
    else
        rc=$?
        head -5 "$LOGS/bench.err"
        fail "bench (cuda): exit $rc; see $LOGS/bench.err"
    fi
else
    note "bench (cuda): 'kvrt bench' not available in this tree"
fi

# On the device machine, hand the logs back through $OUT.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp -r "$LOGS" "$OUT/" 2>/dev/null
    cp "$BUILD"/meson-logs/gpu-check-*.txt "$OUT/" 2>/dev/null
fi

echo
echo "==== gpu-check summary ($(( $(date +%s) - START )) s) ===="
for s in "${SUMMARY[@]}"; do echo "$s"; done
if [ "$FAILED" -ne 0 ]; then
    echo "RESULT: FAILED"
    exit 1
fi
echo "RESULT: OK"
