#!/usr/bin/env bash
# Idempotent set-up for parity: Debian packages, the project venv with the pinned torch
# (requirements.txt), and the C++ build in build/. Fast when nothing changed.
#   ./setup.sh            set up and build
#   PARITY_BUILD_TYPE=Debug ./setup.sh
#   PARITY_ENV_PYTHON=/path/to/python ./setup.sh
#                         build against that environment's torch (a nightly, a source build
#                         `pip install -e .` of pytorch, a vendor's fork): no .venv is made and
#                         nothing is installed into it but a .pth that makes parity_capture
#                         importable; `parity --version` names the torch build (docs/setup.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ROOT=$PWD
log() { echo "setup: $*" >&2; }

# 1. Debian packages (C++ toolchain and libraries; libtorch comes from the torch wheel).
APT_PKGS=(g++ cmake ninja-build ccache libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libssl-dev libeigen3-dev
  chromium  # chromium: the test that renders `parity report`'s HTML headless
  clang libclang-rt-dev libomp-dev  # the sanitizer build and the libFuzzer targets (tests/sanitize_build.sh)
  lld)  # the linker of the Python tests' Inductor kernels (tests/toolchain/g++)
command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null || APT_PKGS+=(python3 python3-venv)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. The venv: torch (pinned in requirements.txt), transformers, safetensors, pytest. Or the
#    user's own environment (PARITY_ENV_PYTHON), taken as it is.
if [ -n "${PARITY_ENV_PYTHON:-}" ]; then
  PY=$(command -v "$PARITY_ENV_PYTHON") || { log "PARITY_ENV_PYTHON=$PARITY_ENV_PYTHON: no such Python"; exit 2; }
  "$PY" -c 'import torch, safetensors' 2>/dev/null \
    || { log "PARITY_ENV_PYTHON=$PY: cannot import torch and safetensors there (parity builds against its torch)"; exit 2; }
  log "building against $("$PY" -c 'import torch; print("torch", torch.__version__, "git", torch.version.git_version)') ($PY)"
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ "$(cat "$site/parity_tools.pth" 2>/dev/null)" = "$ROOT/tools" ] || echo "$ROOT/tools" > "$site/parity_tools.pth"
  BUILD=${PARITY_BUILD_DIR:-build-env}
  export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.cache/ccache}
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${PARITY_BUILD_TYPE:-RelWithDebInfo}" -DPARITY_PYTHON="$PY" \
        -DPARITY_BUILD_TESTS=OFF ${PARITY_CMAKE_ARGS:-} >/dev/null
  cmake --build "$BUILD" -j "${PARITY_JOBS:-2}" | { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
  log "ready: $BUILD/parity ($("$BUILD/parity" --version))"
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat .venv/.parity-requirements 2>/dev/null)" != "$want" ]; then
  log "installing Python requirements (torch, transformers, ...)"
  # Byte-compiled after the install on every core, not by pip one module at a time (the same
  # modules: a Python run with PYTHONDONTWRITEBYTECODE needs them): 58 s against 78 s on a 2-core
  # machine. A module that does not compile is left as pip leaves it, uncompiled.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-compile -r requirements.txt
  .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null || true
  echo "$want" > .venv/.parity-requirements
fi
[ "$(cat "$site/parity_tools.pth" 2>/dev/null)" = "$ROOT/tools" ] || echo "$ROOT/tools" > "$site/parity_tools.pth"

# 3. The C++ build (ccache-backed; ninja does nothing when nothing changed).
export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.cache/ccache}
if [ ! -f build/build.ninja ]; then
  log "configuring build/"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${PARITY_BUILD_TYPE:-RelWithDebInfo}" \
        -DPARITY_PYTHON="$ROOT/.venv/bin/python" ${PARITY_CMAKE_ARGS:-} >/dev/null
fi
cmake --build build -j "${PARITY_JOBS:-2}" | { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
log "ready: build/parity"
