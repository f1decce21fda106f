#!/bin/bash
# Tests of the conformance suite itself: a suite that passes everything
# proves nothing.  The template backend must pass; each mutant (a template
# with one injected fault, see mutants/mutant.c) must fail, and fail at the
# point that describes its fault.
#
# usage: sanity.sh KVRT_CONFORMANCE TEMPLATE_SO [NAME MUTANT_SO PATTERN]...
set -u
conformance=$1 template=$2
shift 2
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$conformance" --plugin "$template" --fail-exit >"$log" 2>&1
status=$?
if [ $status -eq 0 ] && ! grep -q '^not ok' "$log" && grep -q '^ok' "$log"; then
    ok "the template backend passes (--plugin, $(grep -c '^ok' "$log") points)"
else
    not_ok "the template backend passes (--plugin): exit $status"
    grep '^not ok' "$log" | head -5 | sed 's/^/# /'
fi

while [ $# -ge 3 ]; do
    name=$1 module=$2 pattern=$3
    shift 3
    "$conformance" --plugin "$module" --fail-exit >"$log" 2>&1
    status=$?
    failed=$(grep -c '^not ok' "$log")
    if [ $status -ne 0 ] && grep '^not ok' "$log" | grep -q -- "$pattern"; then
        ok "mutant $name fails ($failed points, among them \"$pattern\")"
    else
        not_ok "mutant $name fails at \"$pattern\": exit $status, $failed points failed"
        grep '^not ok' "$log" | head -5 | sed 's/^/# /'
    fi
done

# --fail-exit is what lets scripts see a failure; a missing file must fail too.
"$conformance" --plugin /nonexistent/kvrt-none.so --fail-exit >"$log" 2>&1
status=$?
if [ $status -ne 0 ] && grep -q '^not ok' "$log"; then
    ok "a plugin file that does not exist is a failure, not a pass"
else
    not_ok "a plugin file that does not exist is a failure: exit $status"
fi
echo "1..$n"
