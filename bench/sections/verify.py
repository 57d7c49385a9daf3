"""`parity verify` against the same flow in Python (bench/verify_flow.py)."""
from __future__ import annotations

import os
import sys


from harness import ROOT, BUILD, wall, measured


def bench_verify(tmp: str, quick: bool) -> dict:
    """Wall time of `parity verify` vs the same flow in Python, each as a fresh process, cold
    (empty Inductor and capture caches) and warm (caches filled by the cold run)."""
    models = ["mlp"] if quick else ["llama", "resnet"]
    py = sys.executable
    out = {}
    for model in models:
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, f"inductor-{model}-parity")
        env["PARITY_CACHE_DIR"] = os.path.join(tmp, f"parity-cache-{model}")
        penv = dict(os.environ)
        penv["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, f"inductor-{model}-python")
        pcmd = [os.path.join(BUILD, "parity"), "verify", "--model", model, "--backend", "inductor"]
        row = {}
        for phase in ("cold", "warm"):
            outdir = os.path.join(tmp, f"out-{model}-{phase}")
            row[f"parity_{phase}_s"] = wall(pcmd + ["--output-dir", outdir], env)
            row[f"python_{phase}_s"] = wall([py, os.path.join(ROOT, "bench", "verify_flow.py"), "--model", model,
                                             "--backend", "inductor"], penv)
            row[f"ratio_{phase}"] = row[f"python_{phase}_s"] / row[f"parity_{phase}_s"]
        out[model] = row
    return out


def render(v: dict) -> list:
    lines = []
    env = v["env"]
    lines += ["## verify: `parity verify` vs the same flow in Python", "",
              measured(env) + ".",
              "Each side is a fresh process doing eager twice, the fp64 reference, `torch.compile(backend=\"inductor\")`",
              "and `same()` on the same seeded suite model (eval, float32). The Python side is",
              "`bench/verify_flow.py` (what `benchmarks/dynamo --accuracy` does, in one process, no isolation);",
              "parity also captures the model to a repro dir, isolates the experiment in a child process and",
              "writes results.jsonl. Cold: empty Inductor (and parity capture) caches; warm: the caches the cold",
              "run filled.", "",
              "| model | parity cold | Python cold | ratio | parity warm | Python warm | ratio (Python / parity) |",
              "|---|---|---|---|---|---|---|"]
    for model, row in v["models"].items():
        lines.append(f"| {model} | {row['parity_cold_s']:.1f} s | {row['python_cold_s']:.1f} s | {row['ratio_cold']:.2f}x "
                     f"| {row['parity_warm_s']:.1f} s | {row['python_warm_s']:.1f} s | **{row['ratio_warm']:.2f}x** |")
    lines.append("")
    return lines


def run(tmp: str, a, env: dict) -> dict:
    return {"models": bench_verify(tmp, a.quick)}
