#!/usr/bin/env bash
# The one script a machine with an NVIDIA GPU runs, in under 8 minutes:
#
#   scripts/gpu-check.sh [build-dir]        (default: build-gpu-check)
#
# 0. install missing prerequisites (meson, ninja, pkg-config, libjansson-dev);
# 1. configure a release build with CUDA required (the debug buildtype would
#    add nvcc -G); 2. build; 3. the gpu test suite; 4. the conformance suite
#    on the CUDA backend; 5. `kvrt bench --backend cuda --json`: every op,
#    and decode at 16x2048, 64x4096 and 1x32768, each with the device-to-
#    device copy roofline the plugin measures in the same run; one summary
#    line per op (GB/s and ratio to that roofline).
#
# RESULT: OK only when everything passed *on a CUDA device*.  When
# nvidia-smi sees a GPU, a SKIP of the CUDA device or conformance tests is a
# failure.  Without a GPU the script ends "RESULT: NOT RUN" (exit 2) with
# the skip reasons: nothing was measured.  Every step's exit status counts;
# a missing or partial test log fails; a step is never started with under
# 10 s of the budget left.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build-gpu-check}
LOGS="$BUILD-logs" # beside the build dir: meson wants that one to itself
BUDGET=${KVRT_GPU_CHECK_BUDGET:-480}
START=$(date +%s)
mkdir -p "$LOGS"
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

declare -a SUMMARY=()
FAILED=0
DEVICE_RAN=0
note() { SUMMARY+=("$1"); echo "== $1"; }
fail() { FAILED=1; note "FAIL: $1"; }

remaining() { echo $(( BUDGET - ($(date +%s) - START) )); }
# Seconds a step may take: its own cap, within what is left of the budget
# (5 s kept for the summary); empty when under 10 s are left.
step_limit() {
    local want=$1 left
    left=$(( $(remaining) - 5 ))
    [ "$left" -lt 10 ] && return 1
    echo $(( want < left ? want : left ))
}

# 0. prerequisites
need=()
for c in meson ninja pkg-config; do command -v "$c" > /dev/null || need+=("$c"); done
dpkg-query -W -f='${Status}' libjansson-dev 2> /dev/null | grep -q "install ok installed" ||
    need+=(libjansson-dev)
if ((${#need[@]})); then
    pkgs=()
    for p in "${need[@]}"; do [ "$p" = ninja ] && pkgs+=(ninja-build) || pkgs+=("$p"); done
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if lim=$(step_limit 150) &&
        timeout "$lim" bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            $sudo apt-get install -y -qq --no-install-recommends ${pkgs[*]}" \
            > "$LOGS/install.log" 2>&1; then
        note "prerequisites: installed ${pkgs[*]}"
    else
        tail -5 "$LOGS/install.log" 2> /dev/null
        fail "prerequisites: could not install ${pkgs[*]}; log: $LOGS/install.log"
    fi
fi

GPU_SEEN=0
if command -v nvidia-smi > /dev/null && nvidia-smi -L > "$LOGS/nvidia-smi.log" 2>&1 &&
    grep -q '^GPU ' "$LOGS/nvidia-smi.log"; then
    GPU_SEEN=1
    note "nvidia-smi: $(grep -c '^GPU ' "$LOGS/nvidia-smi.log") GPU(s): $(head -1 "$LOGS/nvidia-smi.log")"
else
    note "nvidia-smi: no GPU visible ($(command -v nvidia-smi > /dev/null && head -1 "$LOGS/nvidia-smi.log" || echo 'not installed'))"
fi

# 1. configure
if [ "$FAILED" -eq 0 ]; then
    if [ -f "$BUILD/build.ninja" ]; then
        setup=(meson setup --reconfigure "$BUILD" -Dcuda=enabled -Dbuildtype=release)
    else
        setup=(meson setup "$BUILD" -Dcuda=enabled -Dbuildtype=release)
    fi
    if ! lim=$(step_limit 120); then
        fail "configure: no time left in the ${BUDGET} s budget"
    elif timeout "$lim" "${setup[@]}" > "$LOGS/setup.log" 2>&1; then
        note "configure: release build with CUDA in $BUILD"
        grep -E "^ *(cuda|rocm|opencl|cpu) *: " "$LOGS/setup.log" || true
    else
        rc=$?
        tail -20 "$LOGS/setup.log"
        fail "configure (${setup[*]}), exit $rc; log: $LOGS/setup.log"
    fi
fi

# 2. build
if [ "$FAILED" -eq 0 ]; then
    if ! lim=$(step_limit 240); then
        fail "build: no time left in the ${BUDGET} s budget"
    elif timeout "$lim" ninja -C "$BUILD" > "$LOGS/build.log" 2>&1; then
        note "build: ok ($(( $(date +%s) - START )) s so far)"
    else
        rc=$?
        grep -E "error|FAILED" "$LOGS/build.log" | head -20
        fail "build: exit $rc$([ "$rc" -eq 124 ] && echo ' (time limit)'); log: $LOGS/build.log"
    fi
fi

# Run `meson test` on a selection; sum its JSON log, which must hold one
# result per selected test.  Prints one line; returns non-zero on any
# failure, a non-zero exit, a partial log, or (GPU present) a skipped
# CUDA test.
run_tests() {
    local label=$1 logbase=$2 want=$3
    shift 3
    local json="$BUILD/meson-logs/$logbase.json" txt="$BUILD/meson-logs/$logbase.txt"
    local expected lim rc=0
    expected=$(meson test -C "$BUILD" --list "$@" 2> /dev/null | grep -c ' / ')
    rm -f "$json" "$txt"
    if ! lim=$(step_limit "$want"); then
        echo "$label: no time left in the ${BUDGET} s budget"
        return 1
    fi
    timeout "$lim" meson test -C "$BUILD" --print-errorlogs --logbase "$logbase" "$@" \
        > "$LOGS/$logbase.log" 2>&1 || rc=$?
    local lines=0 ok=0 bad=0 skip=0
    if [ -f "$json" ]; then
        lines=$(grep -c '"result"' "$json")
        ok=$(grep -c '"result": "OK"' "$json")
        bad=$(grep -Ec '"result": "(FAIL|ERROR|TIMEOUT|UNEXPECTEDPASS)"' "$json")
        skip=$(grep -Ec '"result": "(SKIP|EXPECTEDFAIL)"' "$json")
    fi
    echo "$label: $ok passed, $bad failed, $skip skipped of $expected (meson test exit $rc)"
    grep -Eo '"name": "[^"]*", [^{]*"result": "(FAIL|ERROR|TIMEOUT|UNEXPECTEDPASS|SKIP)"' \
        "$json" 2> /dev/null | sed -E 's/"name": "([^"]*)".*"result": "([A-Z]*)"/    \2 \1/'
    [ -f "$txt" ] && grep -Eo '1\.\.0 # SKIP .*' "$txt" | sed 's/^1\.\.0 # SKIP /    skip: /' | sort -u
    local status=0
    [ "$rc" -ne 0 ] && status=1
    [ "$bad" -ne 0 ] && status=1
    if [ "$expected" -eq 0 ] || [ "$lines" -ne "$expected" ]; then
        echo "    log $json holds $lines results for $expected tests: partial or missing"
        status=1
    fi
    if [ "$GPU_SEEN" -eq 1 ] &&
        grep -Eq '"name": "[^"]*cuda[^"]*", [^{]*"result": "SKIP"' "$json" 2> /dev/null; then
        echo "    a CUDA test skipped although nvidia-smi sees a GPU"
        status=1
    fi
    return $status
}

# 3. the gpu suite (planner, descriptors, device checks of every backend)
if [ "$FAILED" -eq 0 ]; then
    if out=$(run_tests "gpu tests" gpu-check-gpu 150 --suite gpu); then
        note "${out%%$'\n'*}"
    else
        fail "${out%%$'\n'*}"
    fi
    [ "$out" = "${out%%$'\n'*}" ] || echo "${out#*$'\n'}"
    grep -Eq '"name": "[^"]*cuda-device", [^{]*"result": "OK"' \
        "$BUILD/meson-logs/gpu-check-gpu.json" 2> /dev/null && DEVICE_RAN=1
fi

# 4. conformance on the CUDA backend
if [ "$FAILED" -eq 0 ] || [ -f "$BUILD/build.ninja" ]; then
    # Not `| grep -q`: with pipefail, grep quitting early fails the pipeline.
    listed=$(meson test -C "$BUILD" --list 2> /dev/null)
    if grep -q 'conformance-cuda$' <<< "$listed"; then
        if out=$(run_tests "conformance (cuda)" gpu-check-conf 150 conformance-cuda); then
            note "${out%%$'\n'*}"
        else
            fail "${out%%$'\n'*}"
        fi
        [ "$out" = "${out%%$'\n'*}" ] || echo "${out#*$'\n'}"
    else
        fail "conformance (cuda): no conformance-cuda test in $BUILD"
    fi
fi

# 5. the benchmark, only where a CUDA device ran the tests
KVRT="$BUILD/tools/kvrt"
bench() { # bench LABEL FILE ARGS...
    local label=$1 file=$2 lim rc=0
    shift 2
    if ! lim=$(step_limit 90); then
        fail "bench $label: no time left in the ${BUDGET} s budget"
        return
    fi
    timeout "$lim" "$KVRT" bench --backend cuda --json "$@" > "$LOGS/$file" \
        2> "$LOGS/${file%.json}.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        head -5 "$LOGS/${file%.json}.err"
        fail "bench $label: exit $rc$([ "$rc" -eq 124 ] && echo ' (time limit)'); see $LOGS/${file%.json}.err"
        return
    fi
    # One line per op: best layout's GB/s and its ratio to the roofline.
    local lines
    if ! lines=$(python3 - "$LOGS/$file" "$label" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
roof = d.get("roofline_gbps")
kind = d.get("roofline", "memcpy")
best = {}
for r in d["results"]:
    if r.get("skipped") or r.get("gbps") is None:
        continue
    if r["op"] not in best or r["gbps"] > best[r["op"]]["gbps"]:
        best[r["op"]] = r
for op, r in best.items():
    ratio = r.get("ratio_to_roofline", r.get("ratio_to_memcpy"))
    print("bench %s %-7s %8.1f GB/s  %.2fx %s roofline (%s GB/s)  best layout %s"
          % (sys.argv[2], op, r["gbps"], ratio or 0, kind,
             "%.1f" % roof if roof else "?", r["layout"]))
EOF
    ); then
        fail "bench $label: unreadable JSON in $LOGS/$file"
        return
    fi
    while IFS= read -r line; do note "$line"; done <<< "$lines"
}
if [ "$DEVICE_RAN" -eq 1 ] && [ -x "$KVRT" ]; then
    bench "all ops" bench.json
    bench "decode 16x2048" bench-decode-16x2048.json --op decode --seqs 16 --context 2048
    bench "decode 64x4096" bench-decode-64x4096.json --op decode --seqs 64 --context 4096
    bench "decode 1x32768" bench-decode-1x32768.json --op decode --seqs 1 --context 32768
    note "bench (cuda): JSON in $LOGS/bench*.json"
else
    reason=$(grep -ho '1\.\.0 # SKIP .*' "$BUILD"/meson-logs/gpu-check-gpu.txt 2> /dev/null |
             grep -i cuda | head -1 | sed 's/^1\.\.0 # SKIP //')
    note "bench (cuda): SKIP, no CUDA device ran the tests${reason:+: $reason}"
fi

# On the device machine, hand the logs back through $OUT.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp -r "$LOGS" "$OUT/" 2> /dev/null
    cp "$BUILD"/meson-logs/gpu-check-*.txt "$OUT/" 2> /dev/null
fi

echo
echo "==== gpu-check summary ($(( $(date +%s) - START )) s of ${BUDGET} s) ===="
for s in "${SUMMARY[@]}"; do echo "$s"; done
if [ "$FAILED" -ne 0 ]; then
    echo "RESULT: FAILED"
    exit 1
fi
if [ "$DEVICE_RAN" -ne 1 ]; then
    echo "RESULT: NOT RUN (no CUDA device ran the tests; nothing was measured)"
    exit 2
fi
echo "RESULT: OK"
