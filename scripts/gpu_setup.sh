# Sourced by the scripts/gpu_*.sh checks (`source scripts/gpu_setup.sh "$@"`): from the repository
# root, PY (first argument, default python3), OUTDIR ($OUT, else ./gpu-out; created), parity built
# against PY's torch by gpu_build.sh (second argument: a headers dir, for machines without a
# package registry), and parity_capture on PYTHONPATH.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${1:-python3}
OUTDIR=${OUT:-$PWD/gpu-out}
mkdir -p "$OUTDIR"
OUTDIR="$OUTDIR" scripts/gpu_build.sh "$PY" "${2:-}" || exit 1
export PYTHONPATH=$PWD/tools${PYTHONPATH:+:$PYTHONPATH}

# sampled LABEL COMMAND...: runs COMMAND (output in $OUTDIR/LABEL.log) with nvidia-smi sampling every
# 100 ms into $OUTDIR/smi-LABEL.csv; appends its exit status, wall time and start (seconds since the
# epoch) to $OUTDIR/runs.txt.
sampled() {
  local label=$1; shift
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 100 >"$OUTDIR/smi-$label.csv" &
  local smi=$! t0; t0=$(date +%s.%N)
  "$@" >"$OUTDIR/$label.log" 2>&1
  local rc=$?
  echo "$label exit=$rc wall_s=$("$PY" -c "print(round($(date +%s.%N) - $t0, 1))") start=$t0" | tee -a "$OUTDIR/runs.txt"
  kill $smi; wait $smi 2>/dev/null
}
