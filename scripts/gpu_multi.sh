#!/usr/bin/env bash
# Several GPUs of one machine (issue 24): `parity verify --device cuda` on the same suite models at
# -j 1, -j <GPUs> and -j <2 x GPUs> (two slots per GPU), every run warm (a first run fills the
# capture and Inductor caches), nvidia-smi sampled every 100 ms during each; then each run's
# wall time, how busy each GPU was, and whether the verdicts equal those of -j 1. Then a CUDA
# failure (resnet with the fault backend perturbing relu on the GPU) minified at -j 1 and
# -j <GPUs>, sampled the same way, and `parity ci` gating the matrix at -j <GPUs> against a baseline
# written from the -j 1 run. Output in $OUT.
#   scripts/gpu_multi.sh [PYTHON] [HEADERS_DIR]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh" "$@"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PARITY_CACHE_DIR=/tmp/parity-multi-cache TORCHINDUCTOR_CACHE_DIR=/tmp/parity-multi-inductor
NG=$(nvidia-smi -L | wc -l)
MODELS=${MODELS:-mlp resnet mobilenet llama gpt2 bert dlrm qwen2}
TESTS=${TESTS:-eval}
run() {  # run LABEL JOBS
  sampled "$1" build-gpu/parity verify --model $MODELS --test $TESTS --backend inductor --device cuda -j "$2" \
    --output-dir "$OUTDIR/out-$1"
}
echo "gpus=$NG models=$MODELS tests=$TESTS" | tee "$OUTDIR/runs.txt"
run warmup "$NG"
run j1 1
run "j$NG" "$NG"
run "j$((2 * NG))" $((2 * NG))
# parity ci on the same matrix: the baseline written from the -j 1 results, gated at -j <GPUs>.
build-gpu/parity ci --expected "$OUTDIR/expected" --results "$OUTDIR/out-j1/results.jsonl" --update-expected \
  >"$OUTDIR/ci-baseline.log" 2>&1
sampled "ci-j$NG" build-gpu/parity ci --expected "$OUTDIR/expected" --model $MODELS --test $TESTS --backend inductor \
  --device cuda -j "$NG" --output-dir "$OUTDIR/out-ci"
# A CUDA failure: the fault backend perturbs every relu on the GPU.
build-gpu/parity verify --model resnet --backend fault --backend-option op=aten::relu --device cuda \
  --output-dir "$OUTDIR/out-fail" >"$OUTDIR/verify-fail.log" 2>&1
REPRO=$(ls -d "$OUTDIR"/out-fail/repros/*/ | head -1)
echo "repro=$REPRO" | tee -a "$OUTDIR/runs.txt"
sampled minify-j1 build-gpu/parity minify "$REPRO" -j 1 --out "$OUTDIR/minify-j1"
sampled "minify-j$NG" build-gpu/parity minify "$REPRO" -j "$NG" --out "$OUTDIR/minify-j$NG"
"$PY" - "$OUTDIR" "$NG" <<'PY'
import csv, json, os, sys
out, ng = sys.argv[1], int(sys.argv[2])
def verdicts(label):
    rows = [json.loads(l) for l in open(os.path.join(out, f"out-{label}", "results.jsonl")) if l.strip()]
    key = lambda r: (r["model"]["model_name"], json.dumps(r["experiment"], sort_keys=True))
    return {key(r): r["verification_code"] for r in rows if r.get("kind") != "profile"}
def busy(label):
    """Per GPU, the share of nvidia-smi samples with the GPU busy during run `label`."""
    seen = {}
    for row in csv.reader(open(os.path.join(out, f"smi-{label}.csv"))):
        if len(row) < 3: continue
        i, util = int(row[0]), float(row[1])
        n, b = seen.get(i, (0, 0))
        seen[i] = (n + 1, b + (util > 0))
    return {i: round(b / n, 2) for i, (n, b) in sorted(seen.items())}
base = verdicts("j1")
summary = {"gpus": ng, "j1": {"verdicts": len(base)}}
for label in (f"j{ng}", f"j{2 * ng}"):
    v = verdicts(label)
    summary[label] = {"same_verdicts": v == base, "differing": [k[0] for k in base if v.get(k) != base[k]],
                      "busy_fraction_per_gpu": busy(label)}
for label in ("minify-j1", f"minify-j{ng}"):
    p = os.path.join(out, label, "summary.json")
    if os.path.exists(p):
        m = json.load(open(p))
        summary[label] = {k: m.get(k) for k in ("culprit", "backend_runs", "wall_time_s", "seconds_per_backend_run") if k in m}
    summary.setdefault(label, {})["busy_fraction_per_gpu"] = busy(label)
print(json.dumps(summary, indent=1))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
