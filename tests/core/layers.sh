#!/bin/sh
# The core's rooms include one way (CONTRIBUTING.md, "Where things live"):
# text, then settings, then values, then models and the runtime, which do
# not include each other.  A file may include the headers of its own room
# and of the rooms below it, never one above: the internal headers of each
# folder, and the public headers, each of which belongs to the room that
# defines its functions (below).  With -Werror=implicit-function-declaration
# that is also all it can call.  Inside runtime/ its own layers go one way
# too (core/runtime/runtime_internal.h says how): the loader, then the
# plugins, then buffers and caches, then the runtime.
#
# Every core file must sit in a room and every public header must be
# given one, so a new file is placed by this rule.
#
#   layers.sh SOURCE_ROOT
set -u
root=${1:?usage: layers.sh SOURCE_ROOT}
core=$root/core

rooms="text settings values models runtime"
# The rooms each room may include.
may_text="text"
may_settings="text settings"
may_values="text settings values"
may_models="text settings values models"
may_runtime="text settings values runtime"

# Public header:room.  kvrt.h includes everything, xfer.h is
# libkvrt-xfer's and store.h libkvrt-store's: no core file may include them.
public="common.h:text version.h:text settings.h:settings
layout.h:values dtype.h:values device.h:values spec.h:values geometry.h:values placement.h:values
transfer.h:values trace.h:values resolve.h:values model.h:models parallel.h:values
runtime.h:runtime backend.h:runtime buffer.h:runtime cache.h:runtime ops.h:runtime plugin.h:runtime
dlpack.h:runtime wrap.h:runtime kvrt.h:none xfer.h:none store.h:none"

# The runtime's own layers, file:layer from the bottom, and the header of each.
runtime_files="loader.c:1 loader.h:1
plugin.c:2 plugin_validate.c:2 log.c:2 plugin_internal.h:2
buffer.c:3 cache.c:3 cache_ops.c:3 cache_internal.h:3
runtime.c:4 bind.c:4 teardown.c:4 cache_wrap.c:4 dlpack.c:4 dlpack_import.c:4 runtime_internal.h:4"
runtime_headers="loader.h:1 plugin_internal.h:2 cache_internal.h:3 runtime_internal.h:4"

# The room a header belongs to: a public one by the table, an internal one
# by the folder it is in; "" when unknown.
room_of_public() {
    for e in $public; do
        [ "${e%:*}" = "$1" ] && { echo "${e#*:}"; return; }
    done
}
room_of_internal() {
    for r in $rooms; do
        [ -n "$(find "$core/$r" -name "$1" -print -quit)" ] && { echo "$r"; return; }
    done
}

# One TAP point: ok when $1 (what went wrong) is empty.
point() {
    n=$((n + 1))
    if [ -z "$1" ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $3:$1"
    fi
}

n=0
files=""
for r in $rooms; do
    files="$files $(cd "$core" && find "$r" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)"
done
count=$(echo $files | wc -w)
echo "1..$((count + 4))"

for file in $files; do
    room=${file%%/*}
    eval "may=\$may_$room"
    bad=""
    for h in $(sed -n 's/^#include <kvrt\/\([a-z_]*\.h\)>.*/\1/p' "$core/$file"); do
        hr=$(room_of_public "$h")
        case " $may " in *" $hr "*) ;; *) bad="$bad <kvrt/$h> (${hr:-no room})" ;; esac
    done
    for h in $(sed -n 's/^#include "\([a-z_/]*\.h\)".*/\1/p' "$core/$file"); do
        hr=$(room_of_internal "${h##*/}")
        case " $may " in *" $hr "*) ;; *) bad="$bad \"$h\" (${hr:-no room})" ;; esac
    done
    point "$bad" "core/$file ($room) includes nothing of a room above or beside it" "core/$file ($room) includes"
done

# A link left where a file used to be (for citations in a tree that is not
# this one's to edit) must point into a room.
stray=$(cd "$core" && find . -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort | tr '\n' ' ')
for link in $(cd "$core" && find . -maxdepth 1 -type l | LC_ALL=C sort); do
    target=$(readlink "$core/$link")
    case "${target%%/*}" in text | settings | values | models | runtime) [ -f "$core/$target" ] && continue ;; esac
    stray="$stray $link -> $target"
done
point "$stray" "every core source is in a room (core/ itself holds meson.build and links into rooms)" \
    "core sources outside a room"

unplaced=""
for path in "$root"/include/kvrt/*.h; do
    [ -n "$(room_of_public "${path##*/}")" ] || unplaced="$unplaced ${path##*/}"
done
point "$unplaced" "every public header belongs to a room" "public headers without a room"

bad=""
for entry in $runtime_files; do
    file=${entry%:*}
    layer=${entry#*:}
    [ -f "$core/runtime/$file" ] || { bad="$bad $file (missing)"; continue; }
    for h in $runtime_headers; do
        if [ "${h#*:}" -gt "$layer" ] && grep -q "^#include \"${h%:*}\"" "$core/runtime/$file"; then
            bad="$bad $file (layer $layer) includes ${h%:*}"
        fi
    done
done
point "$bad" "inside runtime/, no file includes the header of a layer above its own" "runtime layers broken"

missing=""
listed=" $(echo $runtime_files) "
for path in "$core"/runtime/*.c "$core"/runtime/*.h; do
    file=${path##*/}
    case $listed in *" $file:"*) continue ;; esac
    for h in $runtime_headers; do
        if grep -q "^#include \"${h%:*}\"" "$path"; then
            missing="$missing $file"
            break
        fi
    done
done
point "$missing" "every runtime file that includes a layer's header is placed in a layer" \
    "not placed in a runtime layer"
exit 0
