"""`parity ci` against PyTorch's check_csv gate (bench/ci_gate.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from harness import ROOT, BUILD, measured


# ------------------------------------------------------------------ ci (issue 9)


def bench_ci(tmp: str, quick: bool) -> dict:
    """The pre-merge gate over the suite (eval, inductor, CPU): `parity ci` (with -j 1 and -j 2)
    vs the same gate in Python (bench/ci_gate.py: the dynamo runner's per-model loop + a
    check_accuracy-style comparison), against the same expected files (every model: pass).
    Cold: fresh Inductor and capture caches for each side; warm: the caches its cold run filled."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from parity_capture import models
    names = ["mlp", "resnet"] if quick else models.names()
    expected = os.path.join(tmp, "ci-expected")
    os.makedirs(expected, exist_ok=True)
    by_suite = {}
    for n in names:
        by_suite.setdefault(models.MODELS[n].suite, []).append(n)
    for suite, ns in by_suite.items():
        with open(os.path.join(expected, f"cpu_inductor_{suite}_inference.csv"), "w") as f:
            f.write("name,accuracy,graph_breaks\n" + "".join(f"{n},pass,0\n" for n in sorted(ns)))
    sides = {"parity_j1": None, "parity_j2": None, "python": None}
    out = {"models": names, "cold": {}, "warm": {}, "verdicts": {}}
    for side in sides:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, f"ci-inductor-{side}"),
                   PARITY_CACHE_DIR=os.path.join(tmp, f"ci-cache-{side}"),
                   PYTHONPATH=os.path.join(ROOT, "tools"))
        for phase in ("cold", "warm"):
            work = os.path.join(tmp, f"ci-{side}-{phase}")
            if side == "python":
                cmd = [sys.executable, os.path.join(ROOT, "bench", "ci_gate.py"), "--expected", expected, "--models", *names,
                       "--workdir", work]
            else:
                cmd = [os.path.join(BUILD, "parity"), "ci", "--expected", expected, "--model", *names, "--backend", "inductor",
                       "--output-dir", work, "-j", side[-1]]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            out[phase][side] = time.perf_counter() - t0
            if side == "python":
                out["verdicts"][side] = json.loads(r.stdout.strip().splitlines()[-1])["verdicts"]
            else:
                rows = json.load(open(os.path.join(work, "gate.json")))["rows"]
                out["verdicts"][side] = {row["name"]: row["verdict"] for row in rows}
            out.setdefault("exit", {})[f"{side}_{phase}"] = r.returncode
    return out


def render_ci(c: dict) -> list:
    env = c["env"]
    lines = ["## ci: `parity ci` vs the same gate in Python", "",
             measured(env) + ", in one run.",
             f"The gate over the {len(c['models'])} suite models (eval, float32, Inductor, CPU) against the same expected",
             "files. Python: `bench/ci_gate.py`, the dynamo runner's loop (a fresh process per model running what",
             "`--accuracy` runs, `bench/verify_flow.py`) then a `check_accuracy.py`-style comparison. parity:",
             "`parity ci --expected DIR --model ... --backend inductor` (capture, isolated experiments, retries,",
             "results.jsonl, gate.json), with one job and with two (`-j 2`: two experiments at once, threads split).",
             "Cold: empty Inductor and capture caches; warm: the caches each side's cold run filled.",
             "Warm, the Python gate still pays a fresh process, a torch import and a dynamo trace per model;",
             "parity imports torch once per worker, replays cached captures, and compiles the captured graph.", "",
             "| | Python gate | parity -j 1 | ratio | parity -j 2 | ratio (Python / parity) |", "|---|---|---|---|---|---|"]
    for phase in ("cold", "warm"):
        t = c[phase]
        lines.append(f"| {phase} | {t['python']:.0f} s | {t['parity_j1']:.0f} s | {t['python'] / t['parity_j1']:.2f}x "
                     f"| {t['parity_j2']:.0f} s | **{t['python'] / t['parity_j2']:.2f}x** |")
    v = c["verdicts"]
    agree = all(v["python"].get(n) == v["parity_j1"].get(n) == v["parity_j2"].get(n) for n in c["models"])
    lines += ["", "Verdicts: " + ("all sides agree (" + ", ".join(f"{n} {v['parity_j1'].get(n)}" for n in c["models"]) + ")."
                                   if agree else "they differ: " + json.dumps(v)), ""]
    return lines


render = render_ci


def run(tmp: str, a, env: dict) -> dict:
    return bench_ci(tmp, a.quick)
