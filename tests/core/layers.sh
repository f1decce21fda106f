#!/bin/sh
# The core is layered one way (core/runtime/runtime_internal.h says how): the
# loader, then the plugins, then buffers and caches, then the runtime.  A
# file may include the internal header of its own layer and of those below
# it, never one above, and with -Werror=implicit-function-declaration that
# is also all it can call.  Every core file that includes a layer's header
# is listed here, so a new one must be placed.
#
#   layers.sh SOURCE_ROOT
set -u
core=${1:?usage: layers.sh SOURCE_ROOT}/core/runtime

# file:layer, layers numbered from the bottom.
files="loader.c:1 loader.h:1
plugin.c:2 plugin_validate.c:2 log.c:2 plugin_internal.h:2
buffer.c:3 cache.c:3 cache_ops.c:3 cache_internal.h:3
runtime.c:4 bind.c:4 teardown.c:4 cache_wrap.c:4 dlpack.c:4 dlpack_import.c:4 runtime_internal.h:4"
headers="loader.h:1 plugin_internal.h:2 cache_internal.h:3 runtime_internal.h:4"

n=0
fail=0
count=$(echo $files | wc -w)
echo "1..$((count + 1))"
for entry in $files; do
    file=${entry%:*}
    layer=${entry#*:}
    n=$((n + 1))
    bad=""
    for h in $headers; do
        name=${h%:*}
        above=${h#*:}
        if [ "$above" -gt "$layer" ] && grep -q "^#include \"$name\"" "$core/$file"; then
            bad="$bad $name"
        fi
    done
    if [ -f "$core/$file" ] && [ -z "$bad" ]; then
        echo "ok $n - core/runtime/$file (layer $layer) includes no header of a layer above it"
    else
        echo "not ok $n - core/runtime/$file (layer $layer) includes$bad"
        [ -f "$core/$file" ] || echo "# core/runtime/$file does not exist"
        fail=1
    fi
done

n=$((n + 1))
missing=""
listed=" $(echo $files) "
for path in "$core"/*.c "$core"/*.h; do
    file=${path##*/}
    case $listed in *" $file:"*) continue ;; esac
    for h in $headers; do
        if grep -q "^#include \"${h%:*}\"" "$path"; then
            missing="$missing $file"
            break
        fi
    done
done
if [ -z "$missing" ]; then
    echo "ok $n - every core file that includes a layer's header is placed in a layer"
else
    echo "not ok $n - not placed in a layer:$missing"
fi
exit 0
