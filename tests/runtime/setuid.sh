#!/usr/bin/env bash
# KVRT_PLUGIN_PATH is ignored in setuid/setgid processes (secure_getenv).
# Needs root to hand the probe to another user; skipped with the reason
# otherwise.
probe=$1 plugins=$2
if [ "$(id -u)" -ne 0 ]; then echo "1..0 # SKIP needs root to make a setuid binary"; exit 0; fi
tmp=$(mktemp -d /tmp/kvrt-setuid-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp "$probe" "$tmp/probe"
chmod 755 "$tmp"
echo "1..3"
plain=$(KVRT_PLUGIN_PATH="$plugins" "$tmp/probe")
if [[ "$plain" == *" subset"* ]]; then echo "ok 1 - without setuid KVRT_PLUGIN_PATH is searched ($plain)"; else echo "not ok 1 - without setuid: $plain"; fi
chown nobody "$tmp/probe" && chmod 4755 "$tmp/probe"
out=$(KVRT_PLUGIN_PATH="$plugins" "$tmp/probe" 2>&1)
if [[ "$out" == plugins:* && "$out" != *" subset"* ]]; then echo "ok 2 - setuid: KVRT_PLUGIN_PATH ignored ($out)"
elif mount | grep -q " $(df --output=target /tmp | tail -1) .*nosuid"; then echo "ok 2 # SKIP /tmp is mounted nosuid"
else echo "not ok 2 - setuid: $out"; fi
chown root:nogroup "$tmp/probe" && chmod 2755 "$tmp/probe"
out=$(KVRT_PLUGIN_PATH="$plugins" "$tmp/probe" 2>&1)
if [[ "$out" == plugins:* && "$out" != *" subset"* ]]; then echo "ok 3 - setgid: KVRT_PLUGIN_PATH ignored ($out)"
elif mount | grep -q " $(df --output=target /tmp | tail -1) .*nosuid"; then echo "ok 3 # SKIP /tmp is mounted nosuid"
else echo "not ok 3 - setgid: $out"; fi
