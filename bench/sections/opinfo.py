"""OpInfo samples through parity's interpreter against eager (bench/opinfo.py): opinfo and opinfo_all."""
from __future__ import annotations

import collections
import datetime
import os
import sys
import time

import torch

from harness import BUILD, cpu_name


def bench_opinfo(tmp: str, quick: bool) -> dict:
    """PyTorch's OpInfo database (bench/opinfo.py): each OpInfo's first CPU sample captured, replayed
    by parity's interpreter and compared with Python eager (float32 and bfloat16 forward, float32
    backward where it supports autograd). The section is its coverage table and failure classes."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import opinfo
    ops = opinfo.select_ops(None, 30 if quick else None)
    t0 = time.time()
    rows = opinfo.run(os.path.join(BUILD, "parity"), ops, [torch.float32, torch.bfloat16], 1, 2, tmp)
    seconds = time.time() - t0
    env = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "torch": torch.__version__}
    md = ["## OpInfo: PyTorch's op database replayed by parity", "",
          f"Measured {env['date']} on {env['cpu']}, torch {env['torch']}, in one run of `bench/run_benchmarks.py --sections "
          f"opinfo` ({seconds / 60:.0f} min, {len(rows)} samples). Each of the {len(ops)} OpInfos of",
          "`torch.testing._internal.common_methods_invocations.op_db` gives its first CPU sample per dtype. Python eager",
          "runs it; `parity_capture.capture` records the op applied to the sample's tensors (torch.export, make_fx where",
          "export cannot); `parity repro run --json` replays it with the interpreter, with its fp64 reference, and compares",
          "with the stored eager outputs. A backward sample is the gradient of the op's floating outputs (tangent ones)",
          "with respect to its floating inputs, traced into the graph (torch.func.vjp), so the replay runs the backward's",
          "ATen ops. A sample Python eager cannot run is not counted. `bitwise`: identical bytes, NaN included;",
          "`random`: an output drawn from random numbers or uninitialized memory, compared by shape, dtype and layout.", "",
          ] + opinfo.table(rows).splitlines() + [""]
    return {"rows": len(rows), "seconds": seconds, "classes": dict(collections.Counter(r["cls"] for r in rows)), "markdown": md}


OPINFO_SAMPLES = 10  # per OpInfo in opinfo_all (some OpInfos have over a thousand: max_pool2d's 1440)


def bench_opinfo_all(tmp: str, quick: bool) -> dict:
    """Up to OPINFO_SAMPLES CPU samples of every OpInfo (not only the first), float32 forward: how
    the coverage holds over the database's later samples, which hold the odd cases (empty and
    0-dim tensors, non-contiguous and broadcast inputs, keyword variants)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import opinfo
    ops = opinfo.select_ops(None, 10 if quick else None)
    t0 = time.time()
    rows = opinfo.run(os.path.join(BUILD, "parity"), ops, [torch.float32], OPINFO_SAMPLES, 2, tmp, backward=False)
    seconds = time.time() - t0
    env = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "torch": torch.__version__}
    md = [f"## OpInfo, up to {OPINFO_SAMPLES} samples per OpInfo", "",
          f"Measured {env['date']} on {env['cpu']}, torch {env['torch']}, in one run of `bench/run_benchmarks.py --sections "
          f"opinfo_all` ({seconds / 60:.0f} min, {len(rows)} samples): the first {OPINFO_SAMPLES} CPU samples of each of the "
          f"{len(ops)} OpInfos, float32 forward, captured, replayed and compared as above (their later samples hold the odd "
          "cases: empty and 0-dim tensors, non-contiguous and broadcast inputs, keyword variants).", "",
          ] + opinfo.table(rows).splitlines() + [""]
    return {"rows": len(rows), "seconds": seconds, "classes": dict(collections.Counter(r["cls"] for r in rows)), "markdown": md}


def run(tmp: str, a, env: dict) -> dict:
    return bench_opinfo(tmp, a.quick)


def run_all(tmp: str, a, env: dict) -> dict:
    return bench_opinfo_all(tmp, a.quick)
