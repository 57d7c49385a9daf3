"""What every benchmark section shares: where parity is built, timing, the parity_bench binary,
the machine's name."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PARITY_BUILD_DIR", os.path.join(ROOT, "build"))


def timeit(fn, iters: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def parity_bench(*args, env=None) -> dict:
    # Not in the default build (bench/CMakeLists.txt): built here, once, when a section needs it.
    subprocess.run(["cmake", "--build", BUILD, "--target", "parity_bench"], check=True, capture_output=True)
    out = subprocess.run([os.path.join(BUILD, "parity_bench"), *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ------------------------------------------------------------------ verify (issue 3)


def wall(cmd, env) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return dt


def measured(env: dict) -> str:
    """A section's "Measured ..." line: when, on what machine, with which torch."""
    return f"Measured {env['date']} on {env['cpu']} ({env['threads']} threads), torch {env['torch']}"
