#!/usr/bin/env bash
# Issue 46 on a machine with several GPUs: each distributed program kind of
# tests/python/dist_programs.py captured on NCCL (a GPU per rank), then `parity repro run` of the
# multi-rank dir simulated (every rank in one process, on the GPUs) and for real with Inductor
# (a process per rank in an NCCL group), and again with each of Inductor's communication passes on,
# and `parity verify` over every kind's dir with Inductor (a
# record per rank), `parity minify` of the TP dir with Triton's relu knob, and minify across ranks
# of a failure only the collectives show (a wrong communication pass). Output in $OUT: each
# step's log and summary.txt.
#   scripts/gpu_distributed.sh [PYTHON] [HEADERS_DIR]     (KINDS, WORLD, COMM to change what runs)
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
# Inductor's communication passes, each run for real on every kind whose graphs call collectives:
# compute/communication reordering, FX bucketing of all-gathers, reduce-scatters and all-reduces,
# and micro-pipeline TP (CUDA's symmetric memory).
for kind in $KINDS; do
  for opt in ${COMM:-reorder_for_compute_comm_overlap=True bucket_all_gathers_fx=all bucket_reduce_scatters_fx=all \
                    bucket_all_reduces_fx=all _micro_pipeline_tp=True}; do
    build-gpu/parity repro run "$WORK/$kind" --backend inductor --backend-option "$opt" >"$OUTDIR/comm-$kind-${opt%%=*}.log" 2>&1
    echo "$kind real inductor, $opt: exit $? $(tail -1 "$OUTDIR/comm-$kind-${opt%%=*}.log")" | tee -a "$OUTDIR/summary.txt"
  done
done
if [ -d "$WORK/collectives" ]; then
  build-gpu/parity repro run "$WORK/collectives" --backend inductor --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy \
    >"$OUTDIR/real-relu-knob.log" 2>&1
  echo "collectives real inductor, Triton's relu knob: exit $? $(tail -1 "$OUTDIR/real-relu-knob.log")" | tee -a "$OUTDIR/summary.txt"
fi
# minify of the TP block's multi-rank dir with Triton's relu knob (minifier/ranks.h: each rank
# isolated, the first failing one reduced).
if [ -d "$WORK/tp" ]; then
  build-gpu/parity minify "$WORK/tp" --backend inductor --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy \
    --out "$WORK/minify-tp" >"$OUTDIR/minify-tp.log" 2>&1
  echo "tp minify, Triton's relu knob: exit $? $(grep -E 'minify: rank|culprit' "$OUTDIR/minify-tp.log" | tail -4 | tr '\n' ' ')" | tee -a "$OUTDIR/summary.txt"
  cp "$WORK/minify-tp/summary.json" "$OUTDIR/minify-tp-summary.json" 2>/dev/null
fi
# minify across ranks (minifier/across_ranks.h): a failure only the collectives show, Inductor with a
# post-grad pass that turns sum all_reduces into max (a wrong communication pass), no rank failing
# isolated; the minimum's repro.py then run under torchrun.
cat >"$WORK/bad_comm_pass.py" <<'PASS'
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass
AR = (torch.ops._c10d_functional.all_reduce.default, torch.ops._c10d_functional.all_reduce_.default)
class BadComm(CustomGraphPass):
    def __call__(self, graph):
        for n in graph.nodes:
            if n.op == "call_function" and n.target in AR and n.args[1] == "sum":
                n.args = (n.args[0], "max", *n.args[2:])
    def uuid(self):
        return "parity-gpu-bad-comm-pass"
torch._inductor.config.post_grad_custom_post_pass = BadComm()
PASS
for kind in $KINDS; do
  case $kind in collectives|tp_eval|fsdp2_tp) ;; *) continue ;; esac
  t0=$(date +%s.%N)
  PYTHONPATH=$WORK:$PYTHONPATH build-gpu/parity minify "$WORK/$kind" --backend inductor --import bad_comm_pass --confirm 1 \
    --out "$WORK/across-$kind" >"$OUTDIR/across-$kind.log" 2>&1
  echo "$kind minify across ranks, a wrong comm pass: exit $? in $("$PY" -c "print(round($(date +%s.%N) - $t0, 1))") s $(grep -E '^minified|first failing|stage|culprit' "$OUTDIR/across-$kind.log" | tr '\n' ' ')" | tee -a "$OUTDIR/summary.txt"
  cp "$WORK/across-$kind/summary.json" "$OUTDIR/across-$kind-summary.json" 2>/dev/null
  # The same with workers kept (FORKED=0 leaves it out): every world's rank processes forked from
  # the pool's fork server (runtime/python_run.h; the server never initialises CUDA, each rank does
  # after its fork).
  if [ "${FORKED:-1}" = 1 ]; then
    t0=$(date +%s.%N)
    PYTHONPATH=$WORK:$PYTHONPATH PARITY_WORKER_POOL=$WORK/pool PARITY_KEEP_WORKERS=60 build-gpu/parity minify "$WORK/$kind" \
      --backend inductor --import bad_comm_pass --confirm 1 --out "$WORK/across-forked-$kind" \
      >"$OUTDIR/across-forked-$kind.log" 2>&1
    echo "$kind minify across ranks, ranks forked: exit $? in $("$PY" -c "print(round($(date +%s.%N) - $t0, 1))") s $(grep -E '^minified' "$OUTDIR/across-forked-$kind.log")" | tee -a "$OUTDIR/summary.txt"
    cat "$WORK"/pool/*-fs.log >"$OUTDIR/across-forked-$kind-forkserver.log" 2>/dev/null
    PARITY_WORKER_POOL=$WORK/pool build-gpu/parity workers --stop >/dev/null 2>&1
  fi
  PYTHONPATH=$WORK:$PYTHONPATH "$PY" -m torch.distributed.run --standalone --nproc-per-node "$WORLD" "$WORK/across-$kind/repro.py" \
    >"$OUTDIR/across-$kind-torchrun.log" 2>&1
  echo "$kind minimum under torchrun: exit $? $(grep -c FAIL "$OUTDIR/across-$kind-torchrun.log") FAIL lines" | tee -a "$OUTDIR/summary.txt"
done
dirs=(); for kind in $KINDS; do dirs+=("$WORK/$kind"); done
build-gpu/parity verify "${dirs[@]}" --backend inductor --output-dir "$WORK/verify" >"$OUTDIR/verify.log" 2>&1
echo "verify --backend inductor over every kind: exit $? $(tail -1 "$OUTDIR/verify.log")" | tee -a "$OUTDIR/summary.txt"
cp "$WORK/verify/results.jsonl" "$OUTDIR/verify-results.jsonl" 2>/dev/null
