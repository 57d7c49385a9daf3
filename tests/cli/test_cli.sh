#!/usr/bin/env bash
# CLI contract: exit codes (0 pass, 1 fail, 2 bad input) and output of repro run/show, compare.
set -u
PARITY=$1
DATA=$2
PYTHON=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # expect RC DESCRIPTION -- CMD...
  local want=$1 what=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
expect_err() {  # expect_err NEEDLE
  grep -qF -- "$1" "$tmp/err" || { echo "FAIL: stderr lacks '$1':"; cat "$tmp/err"; fails=$((fails + 1)); }
}

expect 0 "repro run mlp passes" -- "$PARITY" repro run "$DATA/models/mlp"
grep -q "PASS" "$tmp/out" || { echo "FAIL: no PASS line"; fails=$((fails + 1)); }
expect 0 "repro run --json" -- "$PARITY" repro run "$DATA/models/llama" --json
grep -q '"bitwise_equal_outputs": 1' "$tmp/out" || { echo "FAIL: llama not bitwise equal"; cat "$tmp/out"; fails=$((fails + 1)); }
expect 0 "repro show" -- "$PARITY" repro show "$DATA/models/mlp"
grep -q "aten::linear" "$tmp/out" || { echo "FAIL: show lacks aten::linear"; fails=$((fails + 1)); }
expect 2 "repro run on a missing dir" -- "$PARITY" repro run "$tmp/nope"
expect_err "$tmp/nope"
cp -r "$DATA/models/mlp" "$tmp/bad"
sed -i -E 's/"version": [0-9]+/"version": 9/' "$tmp/bad/manifest.json"
expect 2 "repro run on a bad manifest" -- "$PARITY" repro run "$tmp/bad"
expect_err 'manifest.json: field "version" is 9'
expect 2 "unknown backend" -- "$PARITY" repro run "$DATA/models/mlp" --backend nope
# Several dirs in one process: a JSON line each, the bad dir's error among them, the worst status.
expect 2 "repro run over several dirs, one bad" -- "$PARITY" repro run "$DATA/models/mlp" "$tmp/bad" "$DATA/models/llama" --json
expect_err 'manifest.json: field "version" is 9'
[ "$(wc -l <"$tmp/out")" = 3 ] && sed -n 2p "$tmp/out" | grep -q '"exit_status":2' && sed -n 3p "$tmp/out" | grep -q '"pass":true' \
  || { echo "FAIL: several dirs: not a line per dir"; cat "$tmp/out"; fails=$((fails + 1)); }
expect 0 "repro run over several passing dirs" -- "$PARITY" repro run "$DATA/models/mlp" "$DATA/models/llama"
[ "$(grep -c '^== ' "$tmp/out")" = 2 ] || { echo "FAIL: several dirs: no heading per dir"; cat "$tmp/out"; fails=$((fails + 1)); }
expect 2 "bad usage" -- "$PARITY" repro frobnicate

# compare: identical files pass, perturbed files fail, malformed input is exit 2.
f="$DATA/models/mlp/tensors.safetensors"
expect 0 "compare identical" -- "$PARITY" compare "$f" "$f"
expect 2 "compare with a missing file" -- "$PARITY" compare "$f" "$tmp/missing.safetensors"
expect_err "$tmp/missing.safetensors"
printf 'garbage' > "$tmp/garbage.safetensors"
expect 2 "compare garbage" -- "$PARITY" compare "$f" "$tmp/garbage.safetensors"
expect_err "garbage.safetensors"
"$PYTHON" - "$tmp" <<'PY'
import sys, torch
from safetensors.torch import save_file
d = sys.argv[1]
g = torch.Generator().manual_seed(0)
a = torch.randn(1000, generator=g)
save_file({"a": a, "b": a * 2}, f"{d}/ref.safetensors")
save_file({"a": a, "b": a * 2 + 1e-2}, f"{d}/res.safetensors")
save_file({"a": a.double(), "b": (a * 2).double()}, f"{d}/fp64.safetensors")
save_file({"e4m3": a.to(torch.float8_e4m3fn), "e5m2": a.to(torch.float8_e5m2)}, f"{d}/f8.safetensors")
PY
expect 1 "compare perturbed" -- "$PARITY" compare "$tmp/ref.safetensors" "$tmp/res.safetensors"
grep -q "FAIL" "$tmp/out" || { echo "FAIL: no FAIL line"; fails=$((fails + 1)); }
expect 0 "compare perturbed with a per-tensor tolerance" -- "$PARITY" compare "$tmp/ref.safetensors" "$tmp/res.safetensors" --tol-override b=2e-2
expect 1 "compare --json with fp64 ref" -- "$PARITY" compare "$tmp/ref.safetensors" "$tmp/res.safetensors" --fp64-ref "$tmp/fp64.safetensors" --json
grep -q '"rule": "rmse"' "$tmp/out" || { echo "FAIL: --json lacks the rmse rule"; cat "$tmp/out"; fails=$((fails + 1)); }
expect 2 "bad --tol-override" -- "$PARITY" compare "$f" "$f" --tol-override nonsense
# Integrity: a parameter with flipped bits is caught by the manifest's digest (exit 2), not PASS.
cp -r "$DATA/models/resnet" "$tmp/flipped"
"$PYTHON" - "$tmp/flipped/tensors.safetensors" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
p = sys.argv[1]
t = load_file(p)
name = max((k for k in t if k.startswith("param/") and t[k].dtype == torch.float32), key=lambda k: t[k].numel())
bits = t[name].flatten().view(torch.int32)
bits[:64] ^= 1 << 29  # 64 flipped exponent bits in the largest parameter
save_file(t, p)
PY
expect 2 "repro run on flipped parameters" -- "$PARITY" repro run "$tmp/flipped"
expect_err "tensors_sha256"
expect 2 "verify on flipped parameters" -- "$PARITY" verify "$tmp/flipped" --backend eager --output-dir "$tmp/vflip"
expect_err "tensors_sha256"
# Without the digest check, the self-check itself must not let the recomputed fp64 reference excuse the change.
expect 1 "repro run --no-verify-digests on flipped parameters" -- "$PARITY" --no-verify-digests repro run "$tmp/flipped"
grep -q "cannot excuse\|FAIL" "$tmp/out" || { echo "FAIL: no reason given"; cat "$tmp/out"; fails=$((fails + 1)); }

# float8 tensors (documented safetensors dtypes) compare as their float32 values.
expect 0 "compare float8 files" -- "$PARITY" compare "$tmp/f8.safetensors" "$tmp/f8.safetensors"
for bad in nan -1 inf; do
  expect 2 "compare --tol $bad" -- "$PARITY" compare "$f" "$f" --tol "$bad"
  expect_err "--tol"
done

echo "cli: $fails failed"
[ "$fails" = 0 ]
