"""`parity profile` against profiling by hand (bench/profile_by_hand.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


from harness import ROOT, BUILD, measured


# ------------------------------------------------------------------ profile (issue 12)


def bench_profile(tmp: str, quick: bool) -> dict:
    """`parity profile --trace` vs the manual workflow (bench/profile_by_hand.py: the runner's
    --performance with unique kernel names and an eager profiler table, then the compiled
    module's `-p`), each cold (fresh capture and Inductor caches), on the CPU."""
    models = ["mlp"] if quick else ["llama", "resnet"]
    out = {}
    for model in models:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, f"prof-inductor-{model}"),
                   PARITY_CACHE_DIR=os.path.join(tmp, f"prof-cache-{model}"), PYTHONPATH=os.path.join(ROOT, "tools"))
        outdir = os.path.join(tmp, f"prof-out-{model}")
        t0 = time.perf_counter()
        r = subprocess.run([os.path.join(BUILD, "parity"), "profile", "--model", model, "--backend", "inductor", "--json",
                            "--trace", os.path.join(tmp, f"prof-{model}.json"), "--output-dir", outdir],
                           env=env, capture_output=True, text=True)
        parity_s = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"parity profile {model}: {r.stderr[-2000:]}")
        report = json.loads(r.stdout)
        mapped = [row for row in report["breakdown"]["rows"] if row["kernel"]]
        h = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "profile_by_hand.py"), "--model", model,
                            "--workdir", os.path.join(tmp, f"prof-hand-{model}")], env=env, capture_output=True, text=True)
        if h.returncode != 0:
            raise RuntimeError(f"profile_by_hand {model}: {h.stderr[-2000:]}")
        hand = json.loads(h.stdout.strip().splitlines()[-1])
        out[model] = {"parity_s": parity_s, "hand": hand, "ratio": hand["total_s"] / parity_s,
                      "kernels": len(mapped), "kernels_with_nodes": sum(1 for row in mapped if row["nodes"]),
                      "overhead_percent": report["breakdown"]["overhead_percent"]}
    return out


def render_profile(p: dict) -> list:
    env = p["env"]
    lines = ["## profile: `parity profile` vs the profiling workflow by hand", "",
             measured(env) + ", in one run, cold",
             "(fresh capture and Inductor caches on both sides), Inductor on the CPU. By hand (`bench/profile_by_hand.py`,",
             "the steps of the seed documents): the benchmark runner's `--performance` for the model with",
             "`TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=1 TORCHINDUCTOR_BENCHMARK_KERNEL=1` and an eager `torch.profiler`",
             "table, the compiled module's path read from the log, then `python <module>.py -p` (Inductor's wrapper",
             "benchmark: its profile table and chrome trace). parity: `parity profile --model M --backend inductor",
             "--trace t.json` (capture, eager and backend timing, both profiles, kernels mapped to graph nodes and",
             "model lines, the merged trace, the record and the performance CSV row).", "",
             "| model | by hand: runner | by hand: module -p | by hand total | parity profile | ratio (by hand / parity) | kernels mapped to nodes |",
             "|---|---|---|---|---|---|---|"]
    for model, r in p.items():
        if model == "env":
            continue
        h = r["hand"]
        lines.append(f"| {model} | {h['runner_s']:.1f} s | {h['module_p_s']:.1f} s | {h['total_s']:.1f} s | {r['parity_s']:.1f} s "
                     f"| **{r['ratio']:.2f}x** | {r['kernels_with_nodes']} of {r['kernels']} |")
    lines += ["", "By hand, the kernels are not mapped to anything but their names, the module's `-p` runs on random",
              "inputs (`get_args()`), not the model's, and eager and the module are profiled in separate processes,",
              "with separate traces. parity's profiling overhead (a profiled iteration against the unprofiled median) is",
              "in its report: " + ", ".join(f"{m} {r['overhead_percent']:+.0f}%" for m, r in p.items() if m != "env") + ".", ""]
    return lines


render = render_profile


def run(tmp: str, a, env: dict) -> dict:
    return bench_profile(tmp, a.quick)
