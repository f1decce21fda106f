#!/usr/bin/env bash
# Set-up on a Debian 12 machine: install the build's Debian packages that
# are missing, then configure and build kvrt in ./build.
#   scripts/setup.sh [BUILDDIR] [extra meson options...]
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
shift || true

packages=(
  meson ninja-build pkg-config gcc g++ python3
  libjansson-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  hipcc libamdhip64-dev rocm-device-libs
  librsvg2-bin
  clang libclang-rt-14-dev valgrind cppcheck clang-tidy clang-format
  libdlpack-dev python3-torch python3-numpy cmake
  libucx-dev ucx-utils
  liblmdb-dev lmdb-utils libhiredis-dev redis-server redis-tools libssl-dev libxxhash-dev fio
  libzmq3-dev libmsgpack-dev python3-zmq python3-msgpack python3-prometheus-client python3-redis
  iproute2 nftables
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvrt setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# nvcc is not on PATH by default; with it meson builds the CUDA backend.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ -f "$builddir/build.ninja" ]; then
  meson setup --reconfigure "$builddir" "$@" >/dev/null
else
  meson setup "$builddir" "$@"
fi
ninja -C "$builddir"
