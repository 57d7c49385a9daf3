"""The profiling workflow done by hand, as the seed documents describe it (Inductor GPU
profiling; the dynamo benchmark's profiling tips), in two fresh processes:

1. the benchmark runner's `--performance` for one model, with TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=1
   and TORCHINDUCTOR_BENCHMARK_KERNEL=1: eager and compiled latency (medians), compilation
   latency, peak memory, a torch.profiler table of eager, and the compiled module's path found
   in the log (TORCH_LOGS=output_code);
2. `python <compiled module>.py -p`: Inductor's wrapper benchmark profiles the module and writes
   its chrome trace.

Prints one JSON line: each step's wall time and what it produced.

    python bench/profile_by_hand.py --model llama --workdir W
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

STEP1 = r'''
import statistics, sys, time, torch
from parity_capture import models
spec, model, args, kwargs = models.build(sys.argv[1])
model.eval()
def timed(fn, n=20):
    for _ in range(3): fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
with torch.no_grad():
    eager = timed(lambda: model(*args, **kwargs))
    with torch.profiler.profile() as prof:
        for _ in range(5): model(*args, **kwargs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    compiled = torch.compile(model, backend="inductor")
    t0 = time.perf_counter(); compiled(*args, **kwargs); compile_s = time.perf_counter() - t0
    backend = timed(lambda: compiled(*args, **kwargs))
print("RESULT", eager, backend, compile_s)
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    env = dict(os.environ, TORCHINDUCTOR_UNIQUE_KERNEL_NAMES="1", TORCHINDUCTOR_BENCHMARK_KERNEL="1",
               TORCH_LOGS="output_code", TORCHINDUCTOR_CACHE_DIR=os.path.join(a.workdir, "inductor"))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", STEP1, a.model], env=env, capture_output=True, text=True)
    step1 = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-3000:], file=sys.stderr)
        return 1
    paths = re.findall(r"Output code written to: (\S+\.py)", r.stderr + r.stdout)
    if not paths:
        print("no compiled module path in the log", r.stderr[-2000:], file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    env2 = {k: v for k, v in env.items() if k != "TORCH_LOGS"}
    p = subprocess.run([sys.executable, paths[-1], "-p"], env=env2, capture_output=True, text=True, cwd=a.workdir)
    step2 = time.perf_counter() - t0
    trace = re.search(r"Chrome trace for the profile is written to (\S+)", p.stdout + p.stderr)
    print(json.dumps({"runner_s": step1, "module_p_s": step2, "total_s": step1 + step2, "module": paths[-1],
                      "module_p_ok": p.returncode == 0, "trace": trace.group(1) if trace else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
