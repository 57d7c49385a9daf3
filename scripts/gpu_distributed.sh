#!/usr/bin/env bash
# Issue 46 on a machine with several GPUs: each distributed program kind of
# tests/python/dist_programs.py captured on NCCL (a GPU per rank), then `parity repro run` of the
# multi-rank dir simulated (every rank in one process, on the GPUs) and for real with Inductor
# (a process per rank in an NCCL group), and `parity verify` over every kind's dir with Inductor (a
# record per rank), and `parity minify` of the TP dir with Triton's relu knob. Output in $OUT: each
# step's log and summary.txt.
#   scripts/gpu_distributed.sh [PYTHON] [HEADERS_DIR]     (KINDS, WORLD to change what runs)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh" "$@"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 DIST_DEVICE=cuda
# One host: NCCL's bootstrap over loopback (a run on 2026-11-27 lost the TP capture to a refused
# connection on the host's other interface).
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
WORLD=${WORLD:-$(nvidia-smi -L | wc -l)}
KINDS=${KINDS:-collectives ddp ddp_python_reducer fsdp2 tp}
WORK=${WORK:-/tmp/parity-dist}
rm -rf "$WORK"; mkdir -p "$WORK"
for kind in $KINDS; do
  "$PY" tests/python/dist_programs.py "$kind" "$WORLD" "$WORK" >"$OUTDIR/capture-$kind.log" 2>&1
  echo "$kind capture: exit $?" | tee -a "$OUTDIR/summary.txt"
  build-gpu/parity repro run "$WORK/$kind" >"$OUTDIR/simulated-$kind.log" 2>&1
  echo "$kind simulated: exit $? $(tail -1 "$OUTDIR/simulated-$kind.log")" | tee -a "$OUTDIR/summary.txt"
  build-gpu/parity repro run "$WORK/$kind" --backend inductor >"$OUTDIR/real-$kind.log" 2>&1
  echo "$kind real inductor: exit $? $(tail -1 "$OUTDIR/real-$kind.log")" | tee -a "$OUTDIR/summary.txt"
done
build-gpu/parity repro run "$WORK/collectives" --backend inductor --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy \
  >"$OUTDIR/real-relu-knob.log" 2>&1
echo "collectives real inductor, Triton's relu knob: exit $? $(tail -1 "$OUTDIR/real-relu-knob.log")" | tee -a "$OUTDIR/summary.txt"
# minify of the TP block's multi-rank dir with Triton's relu knob (minifier/ranks.h: each rank
# isolated, the first failing one reduced).
build-gpu/parity minify "$WORK/tp" --backend inductor --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy \
  --out "$WORK/minify-tp" >"$OUTDIR/minify-tp.log" 2>&1
echo "tp minify, Triton's relu knob: exit $? $(grep -E 'minify: rank|culprit' "$OUTDIR/minify-tp.log" | tail -4 | tr '\n' ' ')" | tee -a "$OUTDIR/summary.txt"
cp "$WORK/minify-tp/summary.json" "$OUTDIR/minify-tp-summary.json" 2>/dev/null
dirs=(); for kind in $KINDS; do dirs+=("$WORK/$kind"); done
build-gpu/parity verify "${dirs[@]}" --backend inductor --output-dir "$WORK/verify" >"$OUTDIR/verify.log" 2>&1
echo "verify --backend inductor over every kind: exit $? $(tail -1 "$OUTDIR/verify.log")" | tee -a "$OUTDIR/summary.txt"
cp "$WORK/verify/results.jsonl" "$OUTDIR/verify-results.jsonl" 2>/dev/null
