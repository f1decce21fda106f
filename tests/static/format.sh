#!/bin/sh
# The tree is formatted by .clang-format: a TAP test with one point per C,
# C++ or header file under the DIRs.
#
#   format.sh SOURCE_ROOT [DIR...]
#
# Layouts differ between clang-format releases, so only the release the tree
# is formatted with (14, Debian 12's) judges it; any other skips.  To fix a
# file: clang-format-14 -i FILE.  A hand-laid table can be fenced with
# /* clang-format off */ ... /* clang-format on */.
set -u

if [ $# -lt 1 ] || ! src=$(cd "$1" && pwd); then
    echo "usage: $0 SOURCE_ROOT [DIR...]" >&2
    exit 2
fi
shift
[ $# -gt 0 ] || set -- base bench core examples include plugins store tests tools xfer
want=14
fmt=${CLANG_FORMAT:-}
if [ -z "$fmt" ]; then
    for c in clang-format-$want clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            fmt=$c
            break
        fi
    done
fi
if [ -z "$fmt" ] || ! command -v "$fmt" >/dev/null 2>&1; then
    echo "1..0 # SKIP clang-format not found (install clang-format-$want)"
    exit 0
fi
version=$("$fmt" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
if [ "$version" != "$want" ]; then
    echo "1..0 # SKIP $fmt is release ${version:-unknown}; the tree is formatted with clang-format $want"
    exit 0
fi

cd "$src" || exit 2
files=$(find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | LC_ALL=C sort)
n=$(printf '%s\n' "$files" | grep -c .)
echo "1..$n"
i=0
for f in $files; do
    i=$((i + 1))
    if out=$("$fmt" --style=file --dry-run --Werror "$f" 2>&1); then
        echo "ok $i - $f"
    else
        echo "not ok $i - $f is not formatted (run: $fmt -i $f)"
        printf '%s\n' "$out" | head -6 | sed 's/^/# /'
    fi
done
