#!/usr/bin/env bash
# Issue 33 on a GPU (docs/gpu.md "Minify candidates"): the resnet suite model with Triton's relu
# knob, `parity verify --keep-workers 600` (writes the failure's repro dir, keeps its worker),
# then `parity minify -j 4` in the verify's environment (adopting the worker it kept, keeping the
# three it starts: "worker-kept"), the same minify again (adopting all four: "again"), then, with
# the kept workers stopped, `parity minify -j 4` with the defaults (kept runners, runs made
# ahead) and `--fresh-runners` on the same repro dir, each from a copy of the Inductor cache the
# verify left (where a user's minify starts). With
# PYTORCH=SECONDS, PyTorch's minifier on the same model and knob (bench/pytorch_minifier.py),
# stopped after SECONDS (its time is then a lower bound); PARITY_RUNS=0 leaves parity's runs out
# (PyTorch's alone, in a call of its own). DEVICE=cpu: the same on the device machine's CPU with
# Inductor's C++ relu knob (issue 33's CPU figures on a machine other than the 2-core VM);
# MODEL=relunet|block: the held-out-style models of bench/ (tests/python/relu_model.py,
# block_model.py), captured first. One JSON line per run in $OUT/minify.jsonl.
#   scripts/gpu_minify.sh [PYTHON] [HEADERS_DIR]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${1:-python3}
OUTDIR=${OUT:-$PWD/gpu-out}
PARITY=${PARITY:-build-gpu/parity}
MODEL=${MODEL:-resnet}
mkdir -p "$OUTDIR"
[ "${PARITY_RUNS:-1}" = 0 ] || [ -x "$PARITY" ] || OUTDIR="$OUTDIR" scripts/gpu_build.sh "$PY" "${2:-}" || exit 1
export PYTHONPATH=$PWD/tools${PYTHONPATH:+:$PYTHONPATH}
work=/tmp/gpu-minify; rm -rf "$work"; mkdir -p "$work"
if [ "${PARITY_RUNS:-1}" = 1 ]; then
export TORCHINDUCTOR_CACHE_DIR=$work/inductor-verify PARITY_CACHE_DIR=$work/parity-cache PARITY_WORKER_POOL=$work/pool
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then knob=(--backend inductor --backend-option cpp.inject_relu_bug_TESTING_ONLY=accuracy)
else knob=(--backend inductor --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy --device "$DEVICE"); fi
case $MODEL in
  relunet) what=("$(PYTHONPATH=$PWD/tests/python:$PYTHONPATH "$PY" -c "from relu_model import capture_relu; print(capture_relu('$work/relunet', 12))")") ;;
  block) what=("$(PYTHONPATH=$PWD/tests/python:$PYTHONPATH "$PY" -c "from block_model import capture_block; print(capture_block('$work/blocknet'))")") ;;
  *) what=(--model "$MODEL") ;;
esac
t0=$(date +%s.%N)
"$PARITY" verify "${what[@]}" "${knob[@]}" --output-dir "$work/v" --keep-workers 600 >"$OUTDIR/verify.log" 2>&1
echo "{\"run\": \"verify\", \"seconds\": $(awk "BEGIN{print $(date +%s.%N) - $t0}")}" | tee -a "$OUTDIR/minify.jsonl"
repro=$(ls -d "$work"/v/repros/*/ 2>/dev/null | head -1)
[ -n "$repro" ] || { tail -20 "$OUTDIR/verify.log"; exit 1; }
# MODES: mode:jobs ... (worker-kept and again in the verify's environment, the rest from copies)
MODES=${MODES:-worker-kept:4 again:4 kept:4 fresh:4}
for mj in $MODES; do mode=${mj%%:*}; case $mode in worker-kept*|again*) ;; *) cp -r "$work/inductor-verify" "$work/inductor-$mode";; esac; done
stopped=0
for mj in $MODES; do
  mode=${mj%%:*}; jobs=${mj##*:}
  extra=(--keep-workers 0); cache=$work/inductor-$mode
  case $mode in
    worker-kept*|again*) extra=(--keep-workers 600); cache=$work/inductor-verify ;;
    *) [ $stopped = 1 ] || "$PARITY" workers --stop; stopped=1 ;;
  esac
  case $mode in fresh*) extra+=(--fresh-runners) ;; esac
  t0=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=$cache "$PARITY" minify "${repro%/}" -j "$jobs" --out "$work/m-$mode" "${extra[@]}" \
    >"$OUTDIR/minify-$mode.log" 2>&1
  rc=$?
  s=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  "$PY" - "$work/m-$mode/summary.json" "$mode" "$s" "$rc" "$jobs" <<'PYEOF' | tee -a "$OUTDIR/minify.jsonl"
import json, sys
path, mode, s, rc, jobs = sys.argv[1:]
try:
    m = json.load(open(path))
except OSError:
    m = {}
print(json.dumps({"run": "minify-" + mode, "jobs": int(jobs), "seconds": float(s), "rc": int(rc), "backend_runs": m.get("backend_runs"),
                  "seconds_per_run": m.get("seconds_per_backend_run"), "culprit": (m.get("culprit") or {}).get("target"),
                  "ops": [m.get("ops_before"), m.get("ops_after")], "path": (m.get("localization") or {}).get("path"),
                  "runners_started": m.get("runners_started"), "workers_adopted": m.get("workers_adopted"),
                  "localization": m.get("localization"),
                  "steps": {x["step"]: round(x["seconds"], 2) for x in m.get("step_seconds") or []},
                  "compiler": (m.get("compiler_culprit") or {}).get("sentence")}))
PYEOF
done
"$PARITY" workers --stop
fi
if [ -n "${PYTORCH:-}" ]; then
  unset TORCHINDUCTOR_CACHE_DIR
  "$PY" bench/pytorch_minifier.py --model "$MODEL" --device "${DEVICE:-cuda}" --workdir "$work/pytorch" --timeout "$PYTORCH" \
    2>"$OUTDIR/pytorch.log" | tail -1 | tee -a "$OUTDIR/minify.jsonl"
fi
