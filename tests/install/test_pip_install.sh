#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a clean venv (not .venv) holding the pinned torch wheel,
# as a user installs parity into the environment of the torch under test: the binary builds
# against that environment's torch and lands on its PATH, parity_capture imports from any
# directory, `parity --version` names the torch it was built against, and `parity verify --model
# mlp` passes, all without the source tree on any path. ctest label `install` (scripts/test.sh
# runs it when the CI budget holds it).
#   tests/install/test_pip_install.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
python3 -m venv "$work/venv"
py=$work/venv/bin/python
# The pinned wheels of requirements.txt that parity needs at run time, and the build backend;
# --no-compile: pip byte-compiles none of their modules ahead (most of torch's a verify never
# imports), the verify's Python compiles those it imports (measured on a 2-core VM: this step 15 s
# against 45-53 s, the verify 10 s slower).
grep -E '^(torch|safetensors|numpy|jinja2|matplotlib)==' "$src/requirements.txt" | sed 's/ *#.*//' > "$work/pins.txt"
"$py" -m pip install -q --disable-pip-version-check --no-compile -r "$work/pins.txt" 'scikit-build-core>=0.10'
# Built at -O0 (no -g, NDEBUG as a user's build): this test checks what `pip install .` does (the
# build against the environment's torch, what lands where), not the code the compiler makes of
# parity, which the main build compiles at -O2 from the same CMakeLists. The build is most of this
# test's time (measured on a 2-core VM: 96 CPU-s against 147 at -O2 and -g1).
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=cmake.build-type=None --config-settings=cmake.define.CMAKE_CXX_FLAGS="-O0 -DNDEBUG" "$src"
cd "$work"  # away from the source tree; its tools/ is on no path
env -i PATH="$work/venv/bin:/usr/bin:/bin" HOME="$work" bash -c '
  set -euo pipefail
  [ "$(command -v parity)" = "'"$work"'/venv/bin/parity" ] || { echo "parity is not the venv'"'"'s: $(command -v parity)"; exit 1; }
  want=$(python -c "import torch; print(torch.__version__, torch.version.git_version)")
  parity --version | tee version.txt
  grep -q "built against torch ${want% *}, git ${want#* }" version.txt || { echo "--version does not name $want"; exit 1; }
  mkdir -p elsewhere && cd elsewhere
  python -c "import parity_capture, sys; assert \"/venv/\" in parity_capture.__file__, parity_capture.__file__"
  parity verify --model mlp --backend inductor --output-dir out
  grep -q "\"verification_code\":\"PASS\"" out/results.jsonl
'
echo "pip install: PASS"
