#!/bin/bash
# Install test: build this source tree into a temporary prefix, check what
# was installed, then do what a backend author does with only the installed
# kvrt: build examples/template-plugin out of tree through pkg-config and
# run the installed kvrt-conformance on it.
#
# usage: install.sh SOURCE_ROOT MESON NINJA
#
# A separate build (not `meson install` of the build under test): installing
# from inside a running `meson test` of the same build dir would race with
# it.  GPU backends are off to keep it to a couple of minutes.
set -u
src=$1 meson=$2 ninja=$3
unset DESTDIR KVRT_PLUGIN_PATH KVRT_BACKEND VLLM_KV_CACHE_LAYOUT
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvrt-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
libdir=$prefix/lib
plugindir=$libdir/kvrt/plugins

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
# step DESCRIPTION COMMAND...: one point; the command's output goes to the
# log, and its tail to diagnostics when it fails.
step() {
    local what=$1
    shift
    if timeout "${step_timeout:-300}" "$@" >"$tmp/step.log" 2>&1; then
        ok "$what"
        return 0
    fi
    not_ok "$what"
    tail -n 25 "$tmp/step.log" | sed 's/^/# /'
    return 1
}
bail() {
    echo "1..$n"
    exit 0
}

step "configure the tree with --prefix in a temporary folder" \
    "$meson" setup "$tmp/build" "$src" --prefix="$prefix" --libdir=lib --buildtype=debugoptimized \
    -Dopencl=disabled -Dcuda=disabled -Drocm=disabled -Dfuzzers=disabled || bail
# A whole build of the tree: on a loaded machine it takes longer than a step.
step_timeout=1200 step "build it" "$ninja" -C "$tmp/build" || bail
step "meson install" "$meson" install -C "$tmp/build" --no-rebuild || bail

missing=
for h in kvrt.h version.h common.h layout.h dtype.h spec.h geometry.h placement.h transfer.h resolve.h \
         runtime.h plugin.h device.h dlpack.h; do
    [ -f "$prefix/include/kvrt/$h" ] || missing="$missing $h"
done
[ -z "$missing" ] && ok "headers installed in include/kvrt" || not_ok "headers missing from include/kvrt:$missing"

# Each public header compiles on its own from the installed include dir.
bad=
for h in "$prefix"/include/kvrt/*.h; do
    printf '#include <kvrt/%s>\ntypedef int translation_unit_not_empty;\n' "$(basename "$h")" >"$tmp/one.c"
    cc -std=c11 -Wall -Wextra -pedantic -Werror -I"$prefix/include" -c "$tmp/one.c" -o "$tmp/one.o" \
        2>>"$tmp/headers.log" || bad="$bad $(basename "$h")"
done
[ -z "$bad" ] && ok "every installed header compiles alone" || { not_ok "installed headers that do not compile alone:$bad"; sed 's/^/# /' "$tmp/headers.log" | head -20; }

if ls "$libdir"/libkvrt.so.* >/dev/null 2>&1 && [ -e "$libdir/libkvrt.so" ]; then
    ok "libkvrt installed in lib ($(cd "$libdir" && ls libkvrt.so.* | tr '\n' ' '))"
else
    not_ok "libkvrt installed in lib"
fi

export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_dir=$(pkg-config --variable=plugindir kvrt 2>"$tmp/pc.log")
if [ -f "$libdir/pkgconfig/kvrt.pc" ] && [ "$pc_dir" = "$plugindir" ]; then
    ok "kvrt.pc installed, version $(pkg-config --modversion kvrt), plugindir = <prefix>/lib/kvrt/plugins"
else
    not_ok "kvrt.pc installed with plugindir $plugindir (pkg-config says \"$pc_dir\")"
    sed 's/^/# /' "$tmp/pc.log"
fi

if [ -f "$plugindir/kvrt-cpu.so" ]; then
    ok "plugins installed: $(cd "$plugindir" && ls | tr '\n' ' ')"
else
    not_ok "the CPU plugin is installed in $plugindir"
fi

conformance=$prefix/bin/kvrt-conformance
[ -x "$conformance" ] && ok "kvrt-conformance installed in bin" || { not_ok "kvrt-conformance installed in bin"; bail; }

# The template is copied away from the tree first: it must build from its
# own folder and the installed kvrt alone.
cp -r "$src/examples/template-plugin" "$tmp/template-src"
step "template plugin configures out of tree against the installed kvrt (pkg-config)" \
    "$meson" setup "$tmp/template-build" "$tmp/template-src" || bail
step "template plugin builds" "$ninja" -C "$tmp/template-build" || bail

export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_suite() {
    local what=$1
    shift
    if timeout 300 "$conformance" --fail-exit "$@" >"$tmp/suite.log" 2>&1; then
        ok "$what ($(grep -c '^ok' "$tmp/suite.log") points, $(grep -c '# SKIP' "$tmp/suite.log") skipped)"
    else
        not_ok "$what"
        grep -E '^not ok|^# ' "$tmp/suite.log" | head -n 20 | sed 's/^/# /'
    fi
}
run_suite "installed kvrt-conformance --plugin <built kvrt-template.so> passes" \
    --plugin "$tmp/template-build/kvrt-template.so"

# Installed into plugindir, the template is found by name, with no path.
step "template plugin installs into \$(pkg-config --variable=plugindir kvrt)" \
    "$meson" install -C "$tmp/template-build" --no-rebuild
run_suite "installed kvrt-conformance --backend template finds it in plugindir and passes" --backend template
run_suite "installed kvrt-conformance --backend cpu passes against the installed CPU plugin" --backend cpu

# A C++ engine built against the installed prefix twice: through the CMake
# package (find_package, kvrt::kvrt) and through pkg-config.
cmake_dir=$libdir/cmake/kvrt
if [ -f "$cmake_dir/kvrtConfig.cmake" ] && [ -f "$cmake_dir/kvrtConfigVersion.cmake" ]; then
    ok "CMake package installed in lib/cmake/kvrt (kvrtConfig.cmake, kvrtConfigVersion.cmake)"
else
    not_ok "CMake package installed in lib/cmake/kvrt: $(ls "$cmake_dir" 2>&1 | tr '\n' ' ')"
fi
cp -r "$src/tests/install/consumer" "$tmp/consumer-src"
if command -v cmake >/dev/null && command -v c++ >/dev/null; then
    # LD_LIBRARY_PATH off: the program must find libkvrt through what the package gave it.
    step "C++ consumer configures with find_package(kvrt) (CMAKE_PREFIX_PATH=<prefix>)" \
        cmake -S "$tmp/consumer-src" -B "$tmp/consumer-cmake" -DCMAKE_PREFIX_PATH="$prefix" &&
    step "C++ consumer builds against kvrt::kvrt" cmake --build "$tmp/consumer-cmake" &&
    step "C++ consumer (CMake) plans, opens a runtime and round-trips K/V on cpu" \
        env -u LD_LIBRARY_PATH "$tmp/consumer-cmake/consumer"
else
    echo "ok $((n + 1)) - C++ consumer through CMake # SKIP cmake or c++ is not installed"
    n=$((n + 1))
fi
if command -v c++ >/dev/null; then
    # shellcheck disable=SC2046  # pkg-config prints several words on purpose
    step "C++ consumer builds with \$(pkg-config --cflags --libs kvrt)" \
        c++ -std=c++17 -Wall -Wextra -Werror "$tmp/consumer-src/consumer.cpp" -o "$tmp/consumer-pc" \
        $(pkg-config --cflags --libs kvrt) &&
    step "C++ consumer (pkg-config) plans, opens a runtime and round-trips K/V on cpu" "$tmp/consumer-pc"
fi

# The Python package: installed into the prefix's site-packages for
# /usr/bin/python3, it loads the installed libkvrt.
pyinit=$(find "$prefix" -path '*/kvrt/__init__.py' 2>/dev/null | head -n 1)
if [ -z "$pyinit" ]; then
    if [ -x /usr/bin/python3 ]; then not_ok "Python package kvrt installed under the prefix"; fi
else
    pydir=$(dirname "$(dirname "$pyinit")")
    ok "Python package kvrt installed in ${pydir#"$prefix"/}"
    step "installed kvrt imports with /usr/bin/python3 and loads the installed libkvrt" \
        env -u LD_LIBRARY_PATH PYTHONPATH="$pydir" /usr/bin/python3 -c \
        "import kvrt, sys; sys.exit(0 if kvrt.library_path.startswith('$libdir/') and kvrt.layouts()['env'] else 1)"
fi

echo "1..$n"
