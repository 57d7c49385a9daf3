"""`parity verify` against the dynamo runner's accuracy check (bench/accuracy_runner.py)."""
from __future__ import annotations

import os
import sys

from harness import ROOT, BUILD


def bench_accuracy_runner(tmp: str, quick: bool, env: dict) -> dict:
    """verify vs the Python accuracy runner on HF training and eval (bench/accuracy_runner.py)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import accuracy_runner
    models = ("bert",) if quick else ("bert", "gpt2", "t5")
    r = accuracy_runner.run(os.path.join(BUILD, "parity"), sys.executable, tmp, models=models)
    r["env"] = env
    r["markdown"] = accuracy_runner.render(r)
    return r


def run(tmp: str, a, env: dict) -> dict:
    return bench_accuracy_runner(tmp, a.quick, env)
