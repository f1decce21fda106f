#!/bin/bash
# Install test: build this source tree into a temporary prefix with meson's
# default libdir (lib/<multiarch> on Debian), check what was installed, run
# the installed kvrt and kvrt-conformance with no LD_LIBRARY_PATH, then do
# what a backend author does with only the installed kit: copy the installed
# template, build it out of tree through pkg-config and run the installed
# kvrt-conformance on it.
#
# usage: install.sh SOURCE_ROOT MESON NINJA HEADER...
#   HEADER: libkvrt's public headers, as include/kvrt/meson.build lists them
#
# A separate build (not `meson install` of the build under test): installing
# from inside a running `meson test` of the same build dir would race with
# it.  GPU backends are off to keep it to a couple of minutes.  A second
# build with -Dtests=disabled checks that the conformance suite is installed
# without the project's tests.
set -u
src=$1 meson=$2 ninja=$3
shift 3
headers="version.h $*"
unset DESTDIR KVRT_PLUGIN_PATH KVRT_BACKEND VLLM_KV_CACHE_LAYOUT LD_LIBRARY_PATH PKG_CONFIG_PATH
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvrt-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# A step may take long on a loaded machine (the build is a full second build
# of the tree); the whole test has meson's timeout above it.
step_limit=${KVRT_INSTALL_STEP_TIMEOUT:-1500}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
# step DESCRIPTION COMMAND...: one point; the command's output goes to the
# log, and its tail to diagnostics when it fails.
step() {
    local what=$1
    shift
    if timeout "$step_limit" "$@" >"$tmp/step.log" 2>&1; then
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
    "$meson" setup "$tmp/build" "$src" --prefix="$prefix" --buildtype=debugoptimized \
    -Dopencl=disabled -Dcuda=disabled -Drocm=disabled -Dfuzzers=disabled || bail
step "build it" "$ninja" -C "$tmp/build" || bail
step "meson install" "$meson" install -C "$tmp/build" --no-rebuild || bail

# Where meson put the libraries: the folder holding pkgconfig/kvrt.pc.
pc=$(find "$prefix" -path '*/pkgconfig/kvrt.pc' | head -n 1)
if [ -n "$pc" ]; then
    libdir=$(dirname "$(dirname "$pc")")
    ok "kvrt.pc installed in <prefix>/${libdir#"$prefix"/}/pkgconfig"
else
    not_ok "kvrt.pc installed under the prefix"
    bail
fi
plugindir=$libdir/kvrt/plugins

missing=
for h in $headers; do
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
    ok "libkvrt installed in <libdir> ($(cd "$libdir" && ls libkvrt.so.* | tr '\n' ' '))"
else
    not_ok "libkvrt installed in <libdir>"
fi

export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_dir=$(pkg-config --variable=plugindir kvrt 2>"$tmp/pc.log")
if [ -f "$libdir/pkgconfig/kvrt.pc" ] && [ "$pc_dir" = "$plugindir" ]; then
    ok "kvrt.pc says version $(pkg-config --modversion kvrt), plugindir = <libdir>/kvrt/plugins"
else
    not_ok "kvrt.pc installed with plugindir $plugindir (pkg-config says \"$pc_dir\")"
    sed 's/^/# /' "$tmp/pc.log"
fi

if [ -f "$plugindir/kvrt-cpu.so" ]; then
    ok "plugins installed: $(cd "$plugindir" && ls | tr '\n' ' ')"
else
    not_ok "the CPU plugin is installed in $plugindir"
fi

missing=
for f in share/man/man1/kvrt.1 share/man/man1/kvrt-conformance.1 share/man/man7/kvrt-plugin.7 \
         share/doc/kvrt/design.md share/doc/kvrt/writing-a-backend.md \
         share/kvrt/template-plugin/meson.build share/kvrt/template-plugin/template_plugin.c; do
    [ -s "$prefix/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "man pages, guides and the template installed under share/" \
    || not_ok "missing under the prefix:$missing"
bad=
for page in "$prefix"/share/man/man*/*; do
    head -n 1 "$page" | grep -q '^\.TH ' || bad="$bad $(basename "$page")"
    if command -v man >/dev/null 2>&1; then
        man -l "$page" >/dev/null 2>"$tmp/man.log" || bad="$bad $(basename "$page")(man)"
    fi
done
[ -z "$bad" ] && ok "every installed man page is a man page ($(cd "$prefix/share/man" && ls man*/* | tr '\n' ' '))" \
    || not_ok "installed man pages that do not render:$bad"

# Installed programs run from any prefix: the environment has no
# LD_LIBRARY_PATH, so libkvrt is found through their relative run path.
kvrt=$prefix/bin/kvrt
conformance=$prefix/bin/kvrt-conformance
[ -x "$kvrt" ] && ok "kvrt installed in bin" || { not_ok "kvrt installed in bin"; bail; }
[ -x "$conformance" ] && ok "kvrt-conformance installed in bin" || { not_ok "kvrt-conformance installed in bin"; bail; }
step "installed kvrt --version runs without LD_LIBRARY_PATH" "$kvrt" --version
if "$kvrt" plugins >"$tmp/plugins.log" 2>&1 && grep -q "$plugindir/kvrt-cpu.so" "$tmp/plugins.log"; then
    ok "installed kvrt plugins finds the installed CPU plugin in <libdir>/kvrt/plugins"
else
    not_ok "installed kvrt plugins finds the installed CPU plugin in <libdir>/kvrt/plugins"
    head -n 20 "$tmp/plugins.log" | sed 's/^/# /'
fi
step "installed kvrt run --backend cpu verifies a small cache" \
    "$kvrt" run --backend cpu --model "$src/examples/models/tiny-hybrid.kvrt.json" --seqs 2 --context 64

# The template is copied out of the install first: it must build from its
# own folder and the installed kvrt alone.
cp -r "$prefix/share/kvrt/template-plugin" "$tmp/template-src"
chmod -R u+w "$tmp/template-src"
step "template plugin configures out of tree against the installed kvrt (pkg-config)" \
    "$meson" setup "$tmp/template-build" "$tmp/template-src" || bail
step "template plugin builds" "$ninja" -C "$tmp/template-build" || bail

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
# The template declares no uint8; the hybrid model's Mamba states are uint8
# and must run on it all the same (state bytes are opaque).
step "installed kvrt run --backend template runs a hybrid model with uint8 state layers" \
    "$kvrt" run --backend template --model "$src/examples/models/tiny-hybrid.kvrt.json" --seqs 2 --context 64
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
    # pkg-config gives no run path: a program built against a custom prefix
    # names it itself (or sets LD_LIBRARY_PATH), as docs/writing-a-backend.md says.
    step "C++ consumer builds with \$(pkg-config --cflags --libs kvrt) and -rpath \$(pkg-config --variable=libdir kvrt)" \
        c++ -std=c++17 -Wall -Wextra -Werror "$tmp/consumer-src/consumer.cpp" -o "$tmp/consumer-pc" \
        $(pkg-config --cflags --libs kvrt) -Wl,-rpath,"$(pkg-config --variable=libdir kvrt)" &&
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

# A distribution build with -Dtests=disabled drops the project's own tests,
# not the backend kit: kvrt-conformance and its man page are installed and
# the installed suite passes against the installed cpu backend.  UCX and
# Python are off here only to keep the second build short.
nt_prefix=$tmp/prefix-notests
notests() {
    step "configure the tree again with -Dtests=disabled into a second prefix" \
        "$meson" setup "$tmp/build-notests" "$src" --prefix="$nt_prefix" --buildtype=debugoptimized \
        -Dtests=disabled -Dopencl=disabled -Dcuda=disabled -Drocm=disabled -Dfuzzers=disabled \
        -Ducx=disabled -Dpython=disabled || return
    step "build it (-Dtests=disabled)" "$ninja" -C "$tmp/build-notests" || return
    local built
    built=$(find "$tmp/build-notests/tests" -type f -name 'test-*' 2>/dev/null | head -n 3 | tr '\n' ' ')
    if [ -z "$built" ]; then
        ok "-Dtests=disabled builds none of the project's test programs"
    else
        not_ok "-Dtests=disabled still builds test programs: $built"
    fi
    step "meson install (-Dtests=disabled)" "$meson" install -C "$tmp/build-notests" --no-rebuild || return
    local f missing=
    for f in bin/kvrt bin/kvrt-conformance share/man/man1/kvrt.1 share/man/man1/kvrt-conformance.1 \
             share/man/man7/kvrt-plugin.7 share/kvrt/template-plugin/template_plugin.c; do
        [ -s "$nt_prefix/$f" ] || missing="$missing $f"
    done
    if [ -n "$missing" ]; then
        not_ok "the -Dtests=disabled prefix has kvrt-conformance, its man page and the backend kit; missing:$missing"
        return
    fi
    ok "the -Dtests=disabled prefix has kvrt-conformance, its man page and the backend kit"
    if head -n 1 "$nt_prefix/share/man/man1/kvrt-conformance.1" | grep -q '^\.TH '; then
        ok "its kvrt-conformance(1) is a man page"
    else
        not_ok "its kvrt-conformance(1) is a man page"
    fi
    if timeout 300 env -u LD_LIBRARY_PATH "$nt_prefix/bin/kvrt-conformance" --fail-exit --backend cpu \
        >"$tmp/suite-notests.log" 2>&1; then
        ok "kvrt-conformance of the -Dtests=disabled prefix passes against its cpu backend ($(grep -c '^ok' "$tmp/suite-notests.log") points)"
    else
        not_ok "kvrt-conformance of the -Dtests=disabled prefix passes against its cpu backend"
        grep -E '^not ok|^# ' "$tmp/suite-notests.log" | head -n 20 | sed 's/^/# /'
    fi
}
notests

echo "1..$n"
