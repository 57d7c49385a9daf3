#!/usr/bin/env bash
# Builds parity (no tests) in build-gpu/ against a machine's own torch (the device machine's:
# torch 2.11 with CUDA, no package registry), each source alone (-DPARITY_UNITY_BUILD=OFF: with
# 16 cores it costs little, and it is the build that shows a source missing an #include that its
# unity batch happens to give it). Logs go to $OUTDIR.
#   scripts/gpu_build.sh PYTHON [HEADERS_DIR]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=$1
HDRS=${2:-}
OUTDIR=${OUTDIR:-${OUT:-$PWD/gpu-out}}
mkdir -p "$OUTDIR"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DPARITY_PYTHON="$(command -v "$PY")" -DPARITY_BUILD_TESTS=OFF -DPARITY_UNITY_BUILD=OFF \
      ${HDRS:+-DPARITY_HEADERS_DIR=$HDRS} >"$OUTDIR/cmake.log" 2>&1 || { tail -30 "$OUTDIR/cmake.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" >"$OUTDIR/build.log" 2>&1 || { grep -E "error" "$OUTDIR/build.log" | head -30; exit 1; }
