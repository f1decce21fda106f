#!/bin/sh
# Run a store test with a tenant key: a fresh 32-byte key file (mode 0600)
# named by KVRT_STORE_KEY_FILE, which every store the test opens without a
# key_file of its own then takes (docs/security.md, "The store").
#   with_key.sh COMMAND [ARGS...]
set -eu
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvrt-key.XXXXXX")
trap 'rm -rf "$dir"' EXIT
umask 077
# the newline: a key ending in a newline byte would lose it
{ head -c 32 /dev/urandom; echo; } > "$dir/key"
KVRT_STORE_KEY_FILE="$dir/key" "$@"
