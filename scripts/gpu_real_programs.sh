#!/usr/bin/env bash
# The way in from real programs, on a GPU (docs/gpu.md "Real programs"): programs captured with
# the dump backend on CUDA (scripts/real_programs.py), then parity with no --device or --dtype.
# STEPS picks what runs (default all):
#   bf16     bf16 convnets (own, and timm's ghostnet_100) verified by Inductor: dtype and
#            tolerance come from the dump
#   train    a training loop: outputs and every parameter's gradient verified by Inductor
#   fp64     ViT-style and timm's beit_base_patch16_224: the fp64 reference runs (a view legal
#            only on the fused attention layout)
#   relu     ghostnet_100 in float32 with Triton's injected ReLU bug: verify fails, then
#            `parity minify` on the repro dir it wrote, with no flags, runs on the GPU
#   amp      transformers models trained one step under autocast bf16, the loss inside the
#            model, verified by Inductor with their fp64 reference (issue 30)
#   optim    a compiled AdamW step: the parameters and state it writes, verified by Inductor
#   hops     flex_attention (bf16, causal block mask; inference and a train step) verified by
#            Inductor (its Triton template); a torch.cond net with Triton's injected ReLU bug in
#            a branch, verify then `parity minify` (issue 32)
#   TIMM=0: leave timm's models out (the relu step then minifies the own convnet)
#   scripts/gpu_real_programs.sh [PYTHON] [HEADERS_DIR]   ($OUT or ./gpu-out: log.txt, records.jsonl, minify-summary.json)
#   DEVICE=cpu PARITY=build/parity scripts/gpu_real_programs.sh .venv/bin/python   (the CPU's C++ ReLU bug)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${1:-python3}
OUTDIR=${OUT:-$PWD/gpu-out}
STEPS=${STEPS:-bf16 train fp64 relu amp optim hops}
HF=${HF:-bert albert distilbert gpt2 t5 bart}
DEVICE=${DEVICE:-cuda}
PARITY=${PARITY:-build-gpu/parity}
mkdir -p "$OUTDIR"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -x "$PARITY" ] || OUTDIR="$OUTDIR" scripts/gpu_build.sh "$PY" "${2:-}" || exit 1
export PYTHONPATH=$PWD/tools${PYTHONPATH:+:$PYTHONPATH}
knob=triton; [ "$DEVICE" = cpu ] && knob=cpp
timm=(); [ "${TIMM:-1}" = 1 ] && "$PY" -c "import timm" 2>/dev/null && timm=(--timm)
caps=/tmp/real-programs res=/tmp/real-results log=$OUTDIR/log.txt
rm -rf "$res"; mkdir -p "$res"
has() { [[ " $STEPS " == *" $1 "* ]]; }
step() {
  echo "\$ $*" | tee -a "$log"
  local t0=$(date +%s.%N)
  "$@" 2>&1 | tee -a "$log" | tail -4
  local rc=${PIPESTATUS[0]}
  echo "(exit $rc, $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s)" | tee -a "$log"
  return "$rc"
}
verify() { local dir=$1 out=$2; shift 2; [ -d "$caps/$dir" ] && step "$PARITY" verify "$caps/$dir" --backend inductor --output-dir "$res/$out" "$@"; }
progs=()
has bf16 && progs+=(convnet-bf16 ghostnet-bf16)
has train && progs+=(convnet-train)
has fp64 && progs+=(vit-fp32 beit-fp32)
has relu && { [ -n "${timm[*]}" ] && progs+=(ghostnet-fp32) || progs+=(convnet-fp32); }
has amp && for m in $HF; do progs+=("hf-amp-$m"); done
has optim && progs+=(adamw-step)
has hops && progs+=(flex-bf16 flex-train cond-fp32)
"$PY" scripts/real_programs.py "$caps" --device "$DEVICE" "${timm[@]}" --only "${progs[@]}" 2>"$OUTDIR/capture.log" \
  | tee -a "$log" || { tail -20 "$OUTDIR/capture.log"; exit 1; }
has bf16 && { verify convnet-bf16 bf16; verify ghostnet-bf16 bf16; }
has train && verify convnet-train train
has fp64 && { verify vit-fp32 fp64; verify beit-fp32 fp64; }
if has relu; then
  prog=convnet-fp32; [ -d "$caps/ghostnet-fp32" ] && prog=ghostnet-fp32
  verify $prog relu --backend-option $knob.inject_relu_bug_TESTING_ONLY=accuracy
  repro=$(ls -d "$res"/relu/repros/*/ 2>/dev/null | head -1)
  [ -n "$repro" ] && { step "$PARITY" minify "${repro%/}" -j 4; cp "${repro%/}-minify/summary.json" "$OUTDIR/minify-summary.json"; }
fi
has amp && for m in $HF; do verify "hf-amp-$m" "amp-$m"; done
has optim && { verify adamw-step optim; verify adamw-step optim-aot --backend aot_eager; }
if has hops; then
  verify flex-bf16 flex; verify flex-train flex-train
  verify cond-fp32 cond --backend-option $knob.inject_relu_bug_TESTING_ONLY=accuracy
  repro=$(ls -d "$res"/cond/repros/*/ 2>/dev/null | head -1)
  [ -n "$repro" ] && { step "$PARITY" minify "${repro%/}" -j 4; cp "${repro%/}-minify/summary.json" "$OUTDIR/cond-minify-summary.json"; }
fi
cat "$res"/*/results.jsonl > "$OUTDIR/records.jsonl" 2>/dev/null
