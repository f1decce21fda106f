#!/bin/sh
# cppcheck over the project's C files, as a TAP test with one point.
#
#   cppcheck.sh SOURCE_ROOT BUILD_ROOT [DIR...]
#
# Checks every .c file under the DIRs (default: core tests; set
# KVRT_STATIC_DIRS to override, e.g. "core tests plugins tools") that the
# build compiles, each with its own defines and include paths from the
# build's compile_commands.json.  Suppressions live in cppcheck.supp (each
# with its reason) or inline as `// cppcheck-suppress id` with a comment.
set -u

if [ $# -lt 2 ] || ! src=$(cd "$1" && pwd) || ! build=$(cd "$2" && pwd); then
    echo "usage: $0 SOURCE_ROOT BUILD_ROOT [DIR...]" >&2
    exit 2
fi
shift 2
[ $# -gt 0 ] || set -- ${KVRT_STATIC_DIRS:-core tests}
here=$(cd "$(dirname "$0")" && pwd)
jobs=${KVRT_STATIC_JOBS:-2}
cppcheck=${CPPCHECK:-cppcheck}

if ! command -v "$cppcheck" >/dev/null 2>&1; then
    echo "1..0 # SKIP $cppcheck not found"
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || [ ! -f "$build/compile_commands.json" ]; then
    echo "1..0 # SKIP needs python3 and $build/compile_commands.json"
    exit 0
fi

work=$build/tests/static/cppcheck.d
rm -rf "$work"
mkdir -p "$work"
echo "1..1"
if ! python3 "$here/compile-db.py" --cppcheck "$src" "$build" "$work" "$@" > "$work/files"; then
    echo "not ok 1 - cppcheck: cannot read $build/compile_commands.json"
    exit 0
fi
count=$(wc -l < "$work/files")

start=$(date +%s)
# The jansson.cfg library teaches cppcheck jansson's iteration macros, which
# it cannot see (system headers are not parsed).
"$cppcheck" --project="$work/compile_commands.json" \
    --enable=warning,performance,portability --error-exitcode=1 --inline-suppr \
    --library=posix --library=gnu --library="$here/jansson.cfg" \
    --suppressions-list="$here/cppcheck.supp" \
    -j "$jobs" --quiet --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
    > "$work/log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))

grep -E '^[^ ].*:[0-9]+:[0-9]+: [a-z]+: ' "$work/log" | sed "s#^$src/##" | sort -u > "$work/findings"
findings=$(wc -l < "$work/findings")
if [ "$rc" -eq 0 ] && [ "$findings" -eq 0 ]; then
    echo "ok 1 - cppcheck: $count files of $*, no findings (${elapsed} s)"
else
    echo "not ok 1 - cppcheck: $findings findings in $count files of $*, exit status $rc (${elapsed} s)"
    sed 's/^/# /' "$work/findings"
    [ "$findings" -eq 0 ] && tail -n 20 "$work/log" | sed 's/^/# /'
fi
exit 0
