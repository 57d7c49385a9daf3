"""verify vs the Python accuracy runner (issue 43): `parity verify --backend inductor` on
HuggingFace models captured with dump_backend (trained one step under amp bf16, and eval), side
by side with the check PyTorch's dynamo runner does on the same models (bench/hf_flow.py: eager
twice, fp64, the compiled model, same(); a fresh process per model, as the runner runs each model
with --only in a subprocess), in one run on this machine.

Per model, each side as a fresh process: cold (empty Inductor caches on both sides) and warm (the
caches the cold run filled: the CI case); then parity warm again, still a fresh `parity verify`
process, with its Python worker kept from a run before of another graph, the model's other test
(`--keep-workers`: torch, dynamo and Inductor imported once, as a CI job that calls parity per
model would keep them). Then the matrix as
CI runs it: every model in one `parity verify` (its workers and experiment processes started once),
against the runner's subprocess per model; its per-model time is the run's wall time over the models.

    .venv/bin/python bench/accuracy_runner.py [--device cuda --size gpu] [--models bert gpt2 t5] [--out FILE]

Also the section `accuracy_runner` of bench/run_benchmarks.py (docs/benchmarks.md); on a GPU,
docs/gpu.md quotes its output."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_FLOW = os.path.join(ROOT, "bench", "hf_flow.py")


def _env(cache: str, bytecode: str = "") -> dict:
    """The environment of either side: its Inductor cache `cache`; parity's own cache (captures,
    Python bytecode where it keeps it: runtime/python_env.h) beside it, so that a cold run is cold;
    with `bytecode`, Python's bytecode kept in that dir."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONPATH=os.path.join(ROOT, "tools"),
               PARITY_CACHE_DIR=os.path.join(os.path.dirname(cache), "parity-cache"))
    env.pop("PARITY_KEEP_WORKERS", None)
    if bytecode:
        env.update(PYTHONPYCACHEPREFIX=bytecode, PYTHONDONTWRITEBYTECODE="")
    return env


def torch_bytecode_cached(python: str) -> bool:
    """Whether `python` imports torch from bytecode it has or writes beside the sources; when not
    (PYTHONDONTWRITEBYTECODE set, torch installed without bytecode), every process compiles torch's
    modules from source, and parity keeps its processes' bytecode in its own cache."""
    code = ("import importlib.util, os, sys; d = os.path.dirname(importlib.util.find_spec('torch').origin); "
            "c = os.path.join(d, '__pycache__'); "
            "has = os.path.isdir(c) and any(n.startswith('__init__.') and n.endswith('.pyc') for n in os.listdir(c)); "
            "print(int(has or not sys.dont_write_bytecode))")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return p.stdout.strip() == "1"


def _timed(cmd, env) -> tuple:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, p


def _records(out: str) -> list:
    path = os.path.join(out, "results.jsonl")
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def capture(python: str, tmp: str, model: str, test: str, device: str, size: str) -> str:
    d = os.path.join(tmp, "dirs", f"{model}-{test}")
    if not os.path.exists(d):
        p = subprocess.run([python, HF_FLOW, "capture", d, "--model", model, "--test", test, "--device", device, "--size", size],
                           capture_output=True, text=True, env=_env(os.path.join(tmp, "capture-cache")))
        if p.returncode != 0:
            raise RuntimeError(f"capture of {model} {test} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return d


def python_flow(python: str, model: str, test: str, device: str, size: str, cache: str, bytecode: str = "") -> dict:
    wall, p = _timed([python, HF_FLOW, "python", "--model", model, "--test", test, "--device", device, "--size", size],
                     _env(cache, bytecode))
    if p.returncode != 0:
        raise RuntimeError(f"python flow {model} {test}:\n{p.stderr[-4000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def parity_verify(parity: str, dirs: list, device: str, cache: str, out: str, extra=(), pool: str = "") -> dict:
    """One `parity verify` process; with `pool`, in that worker pool, keeping its workers 600 s."""
    shutil.rmtree(out, ignore_errors=True)
    env = _env(cache)
    if pool:
        os.makedirs(pool, mode=0o700, exist_ok=True)
        env.update(PARITY_WORKER_POOL=pool, PARITY_KEEP_WORKERS="600")
    wall, p = _timed([parity, "verify", *dirs, "--backend", "inductor", "--device", device, "--output-dir", out, *extra], env)
    recs = _records(out)
    if len(recs) != len(dirs):
        raise RuntimeError(f"parity verify wrote {len(recs)} records for {len(dirs)} dirs:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return {"process_wall_s": wall, "records": recs}


class device_memory:  # noqa: N801 (a context manager)
    """The most memory in use on the GPUs while the block runs, less what was in use before it, in
    MiB (`mib`): nvidia-smi's memory.used every 50 ms, summed over the GPUs, so every process and
    its CUDA context counts (parity's reference and its worker side by side; the runner's one
    process). None off CUDA or without nvidia-smi.

    The base is taken once no process computes on the GPUs (at most `settle_s` waited): a run
    before may have returned while its processes still let go of their memory (parity leaves the
    reaping of its killed children to a thread), and a base taken then undercounts the next run by
    what they still held (the runner's 12320 MiB against its own 15146 MiB allocated, measured on
    an H200 right after a parity run)."""

    QUERY = ["--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    APPS = ["--query-compute-apps=pid", "--format=csv,noheader"]

    def __init__(self, device: str, settle_s: float = 60.0):
        self.smi = shutil.which("nvidia-smi") if device.startswith("cuda") else None
        self.settle_s = settle_s
        self.mib = None

    def _settle(self):
        deadline = time.monotonic() + self.settle_s
        while time.monotonic() < deadline:
            if not subprocess.run([self.smi, *self.APPS], capture_output=True, text=True).stdout.strip():
                return
            time.sleep(0.2)

    def __enter__(self):
        if self.smi:
            self._settle()
            now = subprocess.run([self.smi, *self.QUERY], capture_output=True, text=True).stdout.split()
            self.gpus, self.base = max(1, len(now)), sum(int(v) for v in now if v.isdigit())
            self.proc = subprocess.Popen([self.smi, *self.QUERY, "-lms", "50"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        if self.smi:
            self.proc.terminate()
            values = [int(v) for v in self.proc.communicate()[0].split() if v.isdigit()]
            sums = [sum(values[i:i + self.gpus]) for i in range(0, len(values) - self.gpus + 1, self.gpus)]
            self.mib = max(sums) - self.base if sums else None
        return False


def run(parity: str, python: str, tmp: str, device: str = "cpu", size: str = "small", models=("bert", "gpt2", "t5"),
        tests=("train", "eval"), jobs: int = 1) -> dict:
    rows = []
    dirs = []
    # Where this Python compiles torch from source in every process, the runner is also timed warm
    # with a bytecode cache of its own (a first run fills it), as parity keeps one.
    bytecode = "" if torch_bytecode_cached(python) else os.path.join(tmp, "python-bytecode")
    for model in models:
        for test in tests:
            d = capture(python, tmp, model, test, device, size)
            dirs.append(d)
            pc, qc = os.path.join(tmp, f"py-{model}-{test}"), os.path.join(tmp, f"pa-{model}-{test}")
            row = {"model": model, "test": test}
            py_cold = python_flow(python, model, test, device, size, pc)
            pa_cold = parity_verify(parity, [d], device, qc, os.path.join(tmp, "out-cold"))
            with device_memory(device) as py_mem:
                py_warm = python_flow(python, model, test, device, size, pc)
            with device_memory(device) as pa_mem:
                pa_warm = parity_verify(parity, [d], device, qc, os.path.join(tmp, "out-warm"))
            if py_mem.mib is not None and pa_mem.mib is not None:
                row["device_used_mib"] = {"python": py_mem.mib, "parity": pa_mem.mib}
            if bytecode:
                python_flow(python, model, test, device, size, pc, bytecode)
                row["python_warm_bytecode_s"] = python_flow(python, model, test, device, size, pc, bytecode)["process_wall_s"]
            # The worker kept: a first run of another graph (the model's other test: the worker's
            # imports and Inductor warm, not this graph's compile in its memory) starts and keeps
            # it, the second (timed) adopts it.
            pool = os.path.join(tmp, f"pool-{model}-{test}")
            other = capture(python, tmp, model, "eval" if test == "train" else "train", device, size)
            parity_verify(parity, [other], device, qc, os.path.join(tmp, "out-keep"), pool=pool)
            pa_kept = parity_verify(parity, [d], device, qc, os.path.join(tmp, "out-kept"), pool=pool)
            subprocess.run([parity, "workers", "--stop"], capture_output=True, env=dict(_env(qc), PARITY_WORKER_POOL=pool))
            rec = pa_warm["records"][0]
            row.update(python_cold_s=py_cold["process_wall_s"], parity_cold_s=pa_cold["process_wall_s"],
                       python_warm_s=py_warm["process_wall_s"], parity_warm_s=pa_warm["process_wall_s"],
                       parity_kept_s=pa_kept["process_wall_s"], kept_verdict=pa_kept["records"][0]["verification_code"],
                       kept_phases=pa_kept["records"][0]["metrics"].get("phase_seconds", {}),
                       python_verdict=py_warm["verdict"], parity_verdict=rec["verification_code"],
                       parity_cold_phases=pa_cold["records"][0]["metrics"].get("phase_seconds", {}),
                       python_phases=py_warm["phases"], parity_phases=rec["metrics"].get("phase_seconds", {}),
                       python_peak_bytes=py_warm.get("peak_bytes", 0),
                       parity_peak_bytes=rec["metrics"].get("peak_memory_bytes", {}))
            row["ratio_cold"] = row["parity_cold_s"] / row["python_cold_s"]
            row["ratio_warm"] = row["parity_warm_s"] / row["python_warm_s"]
            row["ratio_kept"] = row["parity_kept_s"] / row["python_warm_s"]
            if bytecode:
                row["ratio_warm_bytecode"] = row["parity_warm_s"] / row["python_warm_bytecode_s"]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("phases")}), file=sys.stderr, flush=True)
    # The matrix as CI runs it: one parity run over every dir (warm caches: each dir's own cache
    # was filled above, so use a shared one filled by a first matrix run), the runner a process per model.
    shared = os.path.join(tmp, "pa-matrix")
    parity_verify(parity, dirs, device, shared, os.path.join(tmp, "out-matrix-fill"), ["-j", str(jobs)])
    matrix = parity_verify(parity, dirs, device, shared, os.path.join(tmp, "out-matrix"), ["-j", str(jobs)])
    python_total = sum(r["python_warm_s"] for r in rows)
    result = {"device": device, "size": size, "jobs": jobs, "rows": rows, "python_bytecode_cached": not bytecode,
              "matrix": {"experiments": len(dirs), "parity_wall_s": matrix["process_wall_s"],
                         "parity_per_model_s": matrix["process_wall_s"] / len(dirs),
                         "python_per_model_s": python_total / len(dirs),
                         "ratio": matrix["process_wall_s"] / python_total,
                         "verdicts": [r["verification_code"] for r in matrix["records"]]}}
    result["markdown"] = render(result)
    return result


def _fmt_split(phases: dict, top: int = 4) -> str:
    items = sorted(phases.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v:.1f}" for k, v in items)


def render(r: dict) -> list:
    env = r.get("env", {})
    sizes = {"small": "hidden 256, 4 layers, 4 heads, seq 128, batch 4", "gpu": "hidden 768, 12 layers, 12 heads, seq 256, batch 8"}
    lines = ["## verify vs the Python accuracy runner", ""]
    if env:
        lines += [f"Measured {env.get('date', '')} on {env.get('cpu', '')} ({env.get('threads', '')} threads), torch {env.get('torch', '')}"
                  + (f", {r['device']}" if r["device"] != "cpu" else "") + ".", ""]
    lines += [
        f"HuggingFace models ({sizes.get(r['size'], r['size'])}, vocab as in bench/hf_flow.py), trained one step under "
        "amp bf16 (loss inside the model) and run in eval, each captured once with `dump_backend` from the program "
        "itself. parity: `parity verify DIR --backend inductor` (eager twice, fp64, Inductor, same(), every "
        "gradient). Python: `bench/hf_flow.py python`, the dynamo runner's accuracy check of the same model (eager "
        "twice, fp64 deepcopy, the model compiled with Inductor, same() over logits, loss, every gradient and every "
        "parameter after the SGD step), a fresh process per model as the runner runs each model (`--only` in a "
        "subprocess). Cold: empty Inductor caches on both sides; warm: the caches the cold run filled (the CI case). "
        "Kept worker: parity warm again, a fresh `parity verify` process whose Python worker a run of another "
        "graph (the model's other test) kept (`--keep-workers`; the runner has no such thing: its process "
        "imports torch each time). "
        "Ratios are parity's time over Python's: below 1 parity is faster.", "",
        "| model | test | Python cold | parity cold | ratio | Python warm | parity warm | ratio | parity, kept worker | ratio | verdicts (Python / parity / kept) | where parity's warm time went | where its cold time went |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        lines.append(f"| {row['model']} | {row['test']} | {row['python_cold_s']:.1f} s | {row['parity_cold_s']:.1f} s | "
                     f"{row['ratio_cold']:.2f}x | {row['python_warm_s']:.1f} s | {row['parity_warm_s']:.1f} s | "
                     f"**{row['ratio_warm']:.2f}x** | {row['parity_kept_s']:.1f} s | **{row['ratio_kept']:.2f}x** | "
                     f"{row['python_verdict']} / {row['parity_verdict']} / {row['kept_verdict']} | "
                     f"{_fmt_split(row['parity_phases'])} | {_fmt_split(row.get('parity_cold_phases', {}))} |")
    if not r.get("python_bytecode_cached", True):
        lines += ["", "This Python compiles torch from source in every process (it may not write bytecode beside the "
                  "sources, and torch was installed without it); parity's Python processes keep their bytecode in "
                  "parity's cache (runtime/python_env.h). The runner given a bytecode cache of its own too (a first "
                  "run fills it), warm:", "", "| model | test | Python warm, bytecode cached | parity warm | ratio |",
                  "|---|---|---|---|---|"]
        for row in r["rows"]:
            lines.append(f"| {row['model']} | {row['test']} | {row['python_warm_bytecode_s']:.1f} s | "
                         f"{row['parity_warm_s']:.1f} s | **{row['ratio_warm_bytecode']:.2f}x** |")
    m = r["matrix"]
    lines += ["", f"The matrix as a CI gate runs it (warm caches): all {m['experiments']} experiments in one `parity verify` "
              f"(`-j {r['jobs']}`) took {m['parity_wall_s']:.1f} s, {m['parity_per_model_s']:.1f} s per model, against "
              f"{m['python_per_model_s']:.1f} s per model for the runner's process per model: **{m['ratio']:.2f}x** "
              f"(verdicts: {', '.join(m['verdicts'])}).", ""]
    if any(row.get("python_peak_bytes") for row in r["rows"]):
        lines += ["Peak device memory (warm run): Python's `max_memory_allocated` against parity's reference (its "
                  "process) and backend (the worker), which run side by side; and the most in use on the device "
                  "while each ran (nvidia-smi every 50 ms, every process and its CUDA context):", "",
                  "| model | test | Python | parity reference + backend | device, Python | device, parity |",
                  "|---|---|---|---|---|---|"]
        for row in r["rows"]:
            p = row.get("parity_peak_bytes") or {}
            used = row.get("device_used_mib") or {}
            shown = [f"{used[k]} MiB" if k in used else "-" for k in ("python", "parity")]
            lines.append(f"| {row['model']} | {row['test']} | {row['python_peak_bytes'] / 2**30:.2f} GiB | "
                         f"{p.get('reference', 0) / 2**30:.2f} + {p.get('backend', 0) / 2**30:.2f} GiB | "
                         f"{shown[0]} | {shown[1]} |")
        lines.append("")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parity", default=os.path.join(os.environ.get("PARITY_BUILD_DIR", os.path.join(ROOT, "build")), "parity"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", default="small")
    ap.add_argument("--models", nargs="*", default=["bert", "gpt2", "t5"])
    ap.add_argument("--tests", nargs="*", default=["train", "eval"])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = run(a.parity, a.python, tmp, a.device, a.size, a.models, a.tests, a.jobs)
    text = json.dumps(r, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print("\n".join(r["markdown"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
