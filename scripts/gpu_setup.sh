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
