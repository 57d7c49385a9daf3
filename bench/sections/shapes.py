"""--shapes (symbolic graphs at several shapes) against the Python flow (bench/shapes_flow.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


from harness import ROOT, BUILD, wall, measured


# ------------------------------------------------------------------ shapes (issue 22)


def bench_shapes(tmp: str, quick: bool) -> dict:
    """A symbolic graph (bench/shapes_flow.py's block, captured with dynamic=True at batch 6,
    seq 32) verified at 4 shapes: `parity verify --shapes sweep=3` against the same check in
    Python (torch.compile(dynamic=True) once, eager twice, fp64 and same() per shape) at the very
    points parity chose, each a fresh process with cold Inductor caches, then warm."""
    py = sys.executable
    flow = os.path.join(ROOT, "bench", "shapes_flow.py")
    capture_dir = os.path.join(tmp, "shapes-capture")
    t0 = time.perf_counter()
    subprocess.run([py, flow, "--capture", capture_dir, "--points", "6,32"], check=True, capture_output=True)
    capture_s = time.perf_counter() - t0
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor-shapes-parity"))
    penv = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor-shapes-python"))
    row = {"capture_s": capture_s}
    points = None
    for phase in ("cold", "warm"):
        outdir = os.path.join(tmp, f"shapes-out-{phase}")
        row[f"parity_{phase}_s"] = wall([os.path.join(BUILD, "parity"), "verify", capture_dir, "--backend", "inductor",
                                         "--shapes", "sweep=3", "--output-dir", outdir], env)
        rec = json.loads(open(os.path.join(outdir, "results.jsonl")).readline())
        assert rec["verification_code"] == "PASS", rec
        if points is None:  # (batch, seq) of each point, in the order of the graph's input dims
            man = json.load(open(os.path.join(capture_dir, "manifest.json")))
            g = json.load(open(os.path.join(capture_dir, man["graphs"][0]["file"])))
            x = next(n for n in g["nodes"] if n["op"] == "placeholder" and n.get("meta", {}).get("val"))
            dims = x["meta"]["val"][0]["sym_shape"][:2]
            points = [",".join(str(sh["symbols"][d]) if d else "32" for d in dims) for sh in rec["shapes"]]
        row[f"python_{phase}_s"] = wall([py, flow, "--points", *points], penv)
        row[f"ratio_{phase}"] = row[f"python_{phase}_s"] / row[f"parity_{phase}_s"]
    row["points"] = points
    return row


def render_shapes(r: dict) -> list:
    env = r["env"]
    return ["## shapes: a symbolic graph verified at 4 shapes", "",
            measured(env) + ".",
            "A 4-layer pre-norm MLP block over (batch, seq, 256), captured once with `torch.compile(dynamic=True)` at "
            f"(6, 32) ({r['capture_s']:.1f} s, not counted), checked at the points (batch, seq) {', '.join('(' + p + ')' for p in r['points'])}. "
            "parity: `parity verify DIR --backend inductor --shapes sweep=3` (Inductor compiles the graph once as dynamic "
            "in the worker; per point eager twice and the fp64 reference in the interpreter, inputs regenerated at the "
            "point's sizes, an isolated child, results.jsonl). Python: `bench/shapes_flow.py`, the same check by hand at the "
            "same points (`torch.compile(dynamic=True)` once; per point eager twice, an fp64 deepcopy and `same()`). "
            "Each a fresh process; cold: empty Inductor caches, warm: the caches the cold run filled.", "",
            "| parity cold | Python cold | ratio | parity warm | Python warm | ratio (Python / parity) |",
            "|---|---|---|---|---|---|",
            f"| {r['parity_cold_s']:.1f} s | {r['python_cold_s']:.1f} s | {r['ratio_cold']:.2f}x | {r['parity_warm_s']:.1f} s "
            f"| {r['python_warm_s']:.1f} s | **{r['ratio_warm']:.2f}x** |", ""]


render = render_shapes


def run(tmp: str, a, env: dict) -> dict:
    return bench_shapes(tmp, a.quick)
