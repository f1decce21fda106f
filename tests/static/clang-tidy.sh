#!/bin/sh
# clang-tidy over the project's C files, as a TAP test with one point.
#
#   clang-tidy.sh SOURCE_ROOT BUILD_ROOT [DIR...]
#
# Checks every .c file under the DIRs (default: core tests; set
# KVRT_STATIC_DIRS to override, e.g. "core tests plugins tools") that the
# build compiles, with the flags of the build's compile_commands.json and the
# checked-in .clang-tidy.  .cu files are never checked (clang-tidy cannot
# parse nvcc's dialect).  KVRT_STATIC_JOBS sets the parallelism (2).
set -u

if [ $# -lt 2 ] || ! src=$(cd "$1" && pwd) || ! build=$(cd "$2" && pwd); then
    echo "usage: $0 SOURCE_ROOT BUILD_ROOT [DIR...]" >&2
    exit 2
fi
shift 2
[ $# -gt 0 ] || set -- ${KVRT_STATIC_DIRS:-core tests}
here=$(dirname "$0")
jobs=${KVRT_STATIC_JOBS:-2}
tidy=${CLANG_TIDY:-clang-tidy}

if ! command -v "$tidy" >/dev/null 2>&1; then
    echo "1..0 # SKIP $tidy not found"
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || [ ! -f "$build/compile_commands.json" ]; then
    echo "1..0 # SKIP needs python3 and $build/compile_commands.json"
    exit 0
fi

work=$build/tests/static/clang-tidy.d
rm -rf "$work"
mkdir -p "$work"
echo "1..1"
if ! python3 "$here/compile-db.py" "$src" "$build" "$work" "$@" > "$work/files"; then
    echo "not ok 1 - clang-tidy: cannot read $build/compile_commands.json"
    exit 0
fi
count=$(wc -l < "$work/files")

# One file per clang-tidy process, $jobs at a time; each writes its own log
# so that parallel output never interleaves.
start=$(date +%s)
i=0
while read -r f; do
    i=$((i + 1))
    printf '%s\t%s\n' "$f" "$work/log.$i"
done < "$work/files" |
    xargs -P "$jobs" -L 1 sh -c '"$0" -p "$1" --quiet "$2" > "$3" 2>&1; echo "$2 $?" > "$3.rc"' \
        "$tidy" "$work"
elapsed=$(( $(date +%s) - start ))

# A finding in a header is reported once per file that includes it.
pattern='^[^ ].*:[0-9]+:[0-9]+: (warning|error): '
for rc in "$work"/log.*.rc; do
    [ -e "$rc" ] || continue
    log=${rc%.rc}
    grep -E "$pattern" "$log"
    # Non-zero with findings is the normal way to fail; without any, the
    # tool itself broke (a crash, an unreadable file).
    read -r file status < "$rc"
    [ "$status" -ne 0 ] && ! grep -qE "$pattern" "$log" && echo "$file" >> "$work/failed"
done | sed "s#^$src/##" | sort -u > "$work/findings"
findings=$(wc -l < "$work/findings")
if [ "$findings" -eq 0 ] && [ ! -s "$work/failed" ]; then
    echo "ok 1 - clang-tidy: $count files of $*, no findings (${elapsed} s)"
else
    echo "not ok 1 - clang-tidy: $findings findings in $count files of $* (${elapsed} s)"
    sed 's/^/# /' "$work/findings"
    [ -s "$work/failed" ] && sed 's/^/# clang-tidy failed on: /' "$work/failed"
    echo "# full output: $work/log.*"
fi
exit 0
