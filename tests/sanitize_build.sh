#!/usr/bin/env bash
# Configures (once) and builds the sanitizer build: clang, ASan + UBSan on parity's code, the
# unit tests and the libFuzzer targets (fuzz/). Run by ctest as the `sanitize_build` fixture.
#   tests/sanitize_build.sh SOURCE_DIR BUILD_DIR PYTHON [base|all]
# base (the default): the base rooms' unit tests; all: every room's, and the binary.
set -euo pipefail
src=$1 dir=$2 py=$3 scope=${4:-base}
export CCACHE_DIR=${CCACHE_DIR:-$src/.cache/ccache}
if [ ! -f "$dir/build.ninja" ]; then
  CXX=clang++ cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_FUZZ=ON \
    -DPARITY_BUILD_BENCH=OFF -DPARITY_PYTHON="$py" >/dev/null
fi
targets=(parity_base_tests)
[ "$scope" = all ] && targets=(parity parity_tests)
cmake --build "$dir" -j "${PARITY_JOBS:-2}" --target "${targets[@]}" fuzz_all \
  | { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
exit "${PIPESTATUS[0]}"
