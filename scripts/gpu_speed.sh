#!/usr/bin/env bash
# Issue 43 on a GPU machine, in one run: `parity verify` against the dynamo runner's accuracy
# check (bench/accuracy_runner.py: HF models trained one step under amp bf16, per model cold and
# warm, each side a fresh process), then a matrix of HF models at -j 1 and -j <GPUs> (warm, the
# GPUs sampled every 100 ms), their verdicts compared and the throughput ratio. Output in $OUT:
# runner.json/.md, the matrix's records (out-j1/, out-jN/), smi-*.csv, summary.json.
#   scripts/gpu_speed.sh [PYTHON] [HEADERS_DIR]     (MODELS, RUNNER_MODELS, SIZE to change what runs;
#   STAGES, default "capture runner matrix", to split the run over calls: captures already in WORK are kept;
#   REPEATS, default 1, the warm -j 1 / -j N pairs, alternated; KEEP=1: the warm pairs with workers kept
#   across runs, `--keep-workers`, as docs/ci.md sets CI up, each slot count's workers started first by
#   a run of its own, left out of the pairs)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh" "$@"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NG=$(nvidia-smi -L | wc -l)
NJ=${NJ:-$NG}  # the slots of the parallel runs (one per GPU unless given)
MODELS=${MODELS:-bert roberta electra albert distilbert gpt2 gpt_neox llama mistral qwen2 opt bloom t5 bart xlm_roberta megatron_bert gpt_bigcode biogpt}
RUNNER_MODELS=${RUNNER_MODELS:-bert}
PER_GPU=${PER_GPU:-2}  # captures at once on each GPU
SIZE=${SIZE:-gpu}
WORK=${WORK:-/tmp/parity-speed}
STAGES=${STAGES:-capture runner matrix}
stage() { [[ " $STAGES " == *" $1 "* ]]; }
mkdir -p "$WORK/dirs"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUTDIR/progress.txt"; }
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, torch.cuda.get_device_name(0), "x", torch.cuda.device_count(), "transformers", transformers.__version__)' | tee "$OUTDIR/env.txt"
log "built; stages: $STAGES"
# The matrix's programs, captured PER_GPU at a time on each GPU.
i=0
stage capture && for m in $MODELS; do
  [ -d "$WORK/dirs/$m" ] || CUDA_VISIBLE_DEVICES=$((i % NG)) "$PY" bench/hf_flow.py capture "$WORK/dirs/$m" --model "$m" \
      --device cuda --size "$SIZE" >"$OUTDIR/capture-$m.log" 2>&1 &
  i=$((i + 1))
  (( i % (NG * PER_GPU) == 0 )) && wait
done
wait
# Only the dirs that hold a graph (a capture the program's own values refused leaves none).
for d in "$WORK"/dirs/*; do
  "$PY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]+"/manifest.json"))["graphs"] else 1)' "$d" || mv "$d" "$WORK/empty-$(basename "$d")"
done
log "captured $(ls "$WORK/dirs" | wc -l) dirs"
# verify vs the runner, per model (cold and warm, each side its own Inductor cache).
stage runner && "$PY" bench/accuracy_runner.py --parity build-gpu/parity --device cuda --size "$SIZE" --models $RUNNER_MODELS \
  --tests train --out "$OUTDIR/runner.json" >"$OUTDIR/runner.md" 2>"$OUTDIR/runner.err"
stage runner && log "runner: exit $?"
stage matrix || exit 0
# The matrix: a first run fills the caches (cold, -j NG), then -j 1 and -j NG warm.
export TORCHINDUCTOR_CACHE_DIR="$WORK/inductor"
KEEP_ARGS=()
run() {
  local label=$1 j=$2; shift 2
  [ $# -gt 0 ] || set -- "$WORK"/dirs/*  # the dirs given, else every one
  sampled "$label" build-gpu/parity verify "$@" --backend inductor --device cuda -j "$j" "${KEEP_ARGS[@]}" --output-dir "$OUTDIR/out-$label"
}
ls -d "$WORK"/empty-* 2>/dev/null | tee "$OUTDIR/empty.txt"
run cold "$NJ"
log "cold done"
if [ "${KEEP:-0}" = 1 ]; then
  # Each slot count's workers (a pool entry per slot's environment) started by a run of as many dirs.
  KEEP_ARGS=(--keep-workers 600)
  dirs=("$WORK"/dirs/*)
  run prime-j1 1 "${dirs[0]}"
  run "prime-j$NJ" "$NJ" "${dirs[@]:0:$NJ}"
fi
# Warm runs alternated, REPEATS pairs (a lent machine's runs differ from each other by more than
# the ratio's margin): j1, jN, then j1_2, jN_2, ...
for r in $(seq 1 "${REPEATS:-1}"); do
  sfx=$([ "$r" = 1 ] || echo "_$r")
  run "j1$sfx" 1
  run "j$NJ$sfx" "$NJ"
done
log "matrix done"
[ "${KEEP:-0}" = 1 ] && build-gpu/parity workers --stop
"$PY" - "$OUTDIR" "$NJ" <<'PY'
import csv, json, os, re, sys
out, ng = sys.argv[1], int(sys.argv[2])
def records(label):
    return [json.loads(l) for l in open(os.path.join(out, f"out-{label}", "results.jsonl")) if l.strip()]
def busy(label):
    seen = {}
    for row in csv.reader(open(os.path.join(out, f"smi-{label}.csv"))):
        if len(row) < 3: continue
        n, b = seen.get(int(row[0]), (0, 0))
        seen[int(row[0])] = (n + 1, b + (float(row[1]) > 0))
    return {i: round(b / n, 2) for i, (n, b) in sorted(seen.items())}
runs = re.findall(r"^(\S+) exit=\d+ wall_s=([\d.]+)(?: start=([\d.]+))?", open(os.path.join(out, "runs.txt")).read(), re.M)
walls = {label: w for label, w, _ in runs}
starts = {label: float(t) for label, _, t in runs if t}
def timeline(label):
    """Each experiment's start and end, seconds after the run's process started (a record's
    timestamp is when it was written; its wall_time_s how long the experiment took)."""
    t0 = starts.get(label)
    if t0 is None: return None
    return sorted([r["model"]["model_name"], round(r["timestamp"] - r["metrics"]["wall_time_s"] - t0, 2), round(r["timestamp"] - t0, 2),
                   round(r["metrics"].get("phase_seconds", {}).get("worker_start", 0.0), 2)] for r in records(label))
codes = {label: {r["model"]["model_name"]: r["verification_code"] for r in records(label)} for label in walls
         if not label.startswith("prime")}  # every run's, repeats too
pairs = [(f"j1{sfx}", f"j{ng}{sfx}") for sfx in [""] + sorted({l[len("j1"):] for l in walls if l.startswith("j1_")})]
ratios = [float(walls[a]) / float(walls[b]) for a, b in pairs if a in walls and b in walls]
summary = {"gpus": ng, "models": len(codes["j1"]), "kept_workers": os.environ.get("KEEP", "0") == "1", "wall_s": {k: float(v) for k, v in walls.items()},
           "throughput_ratio": ratios[0], "throughput_ratios": [round(x, 3) for x in ratios],
           "throughput_ratio_pooled": sum(float(walls[a]) for a, _ in pairs) / sum(float(walls[b]) for _, b in pairs),
           "same_verdicts": all(c == codes["cold"] for c in codes.values()), "verdicts": codes["j1"],
           "busy": {label: busy(label) for label in ("j1", f"j{ng}")},
           "timeline": {label: timeline(label) for label in ("cold", "j1", f"j{ng}")},
           "experiments_sum_s": {label: round(sum(r["metrics"]["wall_time_s"] for r in records(label)), 1) for label in ("cold", "j1", f"j{ng}")},
           "per_model": {}}
cold = {r["model"]["model_name"]: r for r in records("cold")}
for r in records("j1"):
    name = r["model"]["model_name"]
    summary["per_model"][name] = {"cold_s": cold[name]["metrics"]["wall_time_s"], "warm_s": r["metrics"]["wall_time_s"],
                                  "phases": r["metrics"].get("phase_seconds"), "peak_memory_bytes": r["metrics"].get("peak_memory_bytes")}
for r in records(f"j{ng}"):
    summary["per_model"][r["model"]["model_name"]][f"phases_j{ng}"] = r["metrics"].get("phase_seconds")
print(json.dumps(summary, indent=1))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
log "all done"
