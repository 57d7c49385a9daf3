#!/usr/bin/env bash
# Builds parity against the machine's own torch and checks the interpreter on CUDA: each suite
# model is captured on the GPU (Python eager outputs stored), then `parity repro run --device
# cuda` runs the captured graph and compares. Results (JSON per model) go to $OUT or ./gpu-out.
#   scripts/gpu_check.sh [PYTHON] [HEADERS_DIR]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh" "$@"
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "transformers", transformers.__version__)' | tee "$OUTDIR/env.txt"
tmp=$(mktemp -d)
for m in ${MODELS:-mlp resnet llama bert}; do
  for dt in ${DTYPES:-float32}; do
    d="$tmp/$m-$dt"
    "$PY" -m parity_capture capture --model "$m" --out "$d" --device cuda --dtype "$dt" >/dev/null 2>"$OUTDIR/capture-$m-$dt.log" \
      || { echo "$m $dt: capture failed"; tail -5 "$OUTDIR/capture-$m-$dt.log"; continue; }
    tol=1e-4; [ "$dt" != float32 ] && tol=1e-2
    build-gpu/parity repro run "$d" --device cuda --tol $tol --json >"$OUTDIR/run-$m-$dt.json" 2>"$OUTDIR/run-$m-$dt.err"
    echo "$m $dt: exit $? $("$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); g=r['graphs'][0]; o=g['outputs'][0].get('stats', {}); print('pass', r['pass'], 'bitwise', g['bitwise_equal_outputs'], 'of', len(g['outputs']), 'max_abs', o.get('max_abs_err', 0), 'max_rel', o.get('max_rel_err', 0), 'ms', round(g['run_ms'],2))" "$OUTDIR/run-$m-$dt.json" 2>&1)"
  done
done

# Workers forked from their pool key's fork server on CUDA (runtime/fork_server.h): two slots in a
# fresh pool. The server never initialises CUDA; each forked worker does, after its fork.
pool=$(mktemp -d)
chmod 700 "$pool"
PARITY_WORKER_POOL=$pool build-gpu/parity verify --model mlp --model resnet --backend inductor --device cuda -j 2 \
  --keep-workers 5 --output-dir "$tmp/forked" >"$OUTDIR/forkserver.log" 2>&1
rc=$?
echo "fork server: exit $rc, $(grep -c ' PASS ' "$OUTDIR/forkserver.log") PASS, forked workers alive: $(($(pgrep -fc "parity_capture.forkserver --socket $pool") - 1)), spawned: $(pgrep -fc "parity_capture.worker --socket $pool")"
cat "$pool"/*-fs.log "$OUTDIR/forkserver.log" | tail -8

