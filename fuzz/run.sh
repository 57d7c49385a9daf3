#!/usr/bin/env bash
# A bounded fuzz run of one target, seeded from the test fixtures.
#   fuzz/run.sh FUZZ_BIN_DIR TESTDATA TARGET SECONDS [libFuzzer flags...]
# Exit 0: no finding. Exit 1: a crash, sanitizer report, leak, timeout or OOM; the reproducer is
# kept under FUZZ_BIN_DIR/findings/TARGET/, printed (hex) and given with the command that replays it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 4 ] || { echo "usage: $0 FUZZ_BIN_DIR TESTDATA TARGET SECONDS [libFuzzer flags...]" >&2; exit 2; }
bin_dir=$1 testdata=$2 target=$3 seconds=$4
shift 4
bin=$bin_dir/fuzz_$target
[ -x "$bin" ] || { echo "run.sh: $bin: no such fuzz target (build with -DPARITY_FUZZ=ON)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/parity-fuzz-$target-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
python3 "$here/seeds.py" "$target" "$testdata" "$work/corpus"

export PARITY_FUZZ_REPRO=$testdata/models/mlp  # fuzz_manifest's graphs and tensors
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
# -timeout: one input running longer than 10 s is a hang; -rss_limit_mb: a runaway allocation.
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" > "$work/log" 2>&1
rc=$?
set -e
grep -E '^#[0-9]+.*(DONE|pulse)|^stat::|^Done ' "$work/log" | tail -12 || true
if [ "$rc" -eq 0 ] && [ -z "$(ls -A "$work/artifacts")" ]; then
  runs=$(grep -o 'number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz_$target: no finding in $runs executions"
  exit 0
fi
keep=$bin_dir/findings/$target
mkdir -p "$keep"
tail -60 "$work/log"
for f in "$work/artifacts"/*; do
  [ -e "$f" ] || continue
  cp "$f" "$keep/"
  echo "---- reproducer $keep/$(basename "$f") ($(stat -c %s "$f") bytes):"
  head -c 512 "$f" | od -A d -t x1z | head -24
  echo "replay: PARITY_FUZZ_REPRO=$PARITY_FUZZ_REPRO $bin $keep/$(basename "$f")"
done
echo "fuzz_$target: FAILED (exit $rc)"
exit 1
