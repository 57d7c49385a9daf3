#!/usr/bin/env bash
# Issue 47 on a GPU: PyTorch's repro scripts of a CUDA graph, written by PyTorch's own writer
# (after_aot's save_graph_repro: a repro.py with its inputs stored, an fx_graph_runnable.py with
# none; an optimizer step's foreach graph that writes its arguments), imported by `parity import`,
# verified with Inductor on CUDA, and Triton's relu knob minified to the relu. Output in $OUT: each step's log and summary.txt.
#   scripts/gpu_import.sh [PYTHON] [HEADERS_DIR]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh" "$@"
WORK=${WORK:-/tmp/parity-import}
rm -rf "$WORK"; mkdir -p "$WORK"
"$PY" - "$WORK" <<'PYEOF' >"$OUTDIR/write.log" 2>&1
import sys, torch
from torch._dynamo.repro.after_aot import save_graph_repro
from torch.fx.experimental.proxy_tensor import make_fx
work = sys.argv[1]
def f(x, w):
    return (torch.relu(x @ w) * 2).sum(1), torch.tanh(x)
args = [torch.randn(64, 128, device="cuda"), torch.randn(128, 32, device="cuda")]
gm = make_fx(f)(*args)
for name, save_dir in (("repro.py", f"{work}/checkpoints"), ("fx_graph_runnable.py", None)):
    with open(f"{work}/{name}", "w") as fd:
        save_graph_repro(fd, gm, args, "inductor_accuracy" if save_dir else "inductor", save_dir=save_dir)
# An optimizer step's graph as pytorch/pytorch#177122 pastes it: a foreach add over the
# parameters, copied back into them, returning nothing.
from torch.func import functionalize
def step(*ps):
    torch._foreach_add_(list(ps), 1)
params = [torch.randn(256 * (k + 1), device="cuda") for k in range(6)]
step_gm = make_fx(functionalize(step, remove="mutations_and_views"))(*[p.clone() for p in params])
with open(f"{work}/foreach_step.py", "w") as fd:
    save_graph_repro(fd, step_gm, params, "inductor_accuracy", save_dir=f"{work}/checkpoints")
PYEOF
echo "scripts written: exit $?" | tee -a "$OUTDIR/summary.txt"
for s in repro fx_graph_runnable foreach_step; do
  build-gpu/parity import "$WORK/$s.py" --out "$WORK/$s" >"$OUTDIR/import-$s.log" 2>&1
  echo "$s import: exit $? $(grep -o '"device": *"[^"]*"' "$WORK/$s/manifest.json") $(grep -o '"generated_storages": *[0-9]*' "$WORK/$s/manifest.json")" | tee -a "$OUTDIR/summary.txt"
  build-gpu/parity verify "$WORK/$s" --backend inductor --output-dir "$WORK/v-$s" >"$OUTDIR/verify-$s.log" 2>&1
  echo "$s verify inductor: exit $? $(tail -1 "$OUTDIR/verify-$s.log")" | tee -a "$OUTDIR/summary.txt"
done
build-gpu/parity minify "$WORK/repro" --backend-option triton.inject_relu_bug_TESTING_ONLY=accuracy --no-compiler-bisect \
  --out "$WORK/m" >"$OUTDIR/minify.log" 2>&1
echo "repro minify, Triton's relu knob: exit $? culprit $(grep -o '"target": *"[^"]*"' "$WORK/m/summary.json" | head -1)" | tee -a "$OUTDIR/summary.txt"
