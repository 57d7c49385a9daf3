"""`parity minify` against PyTorch's minifier (bench/pytorch_minifier.py)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time

from harness import ROOT, BUILD, measured


# ------------------------------------------------------------------ minify (issues 4, 13)
MINIFY_MODELS = ["relunet", "resnet", "block"]


def bench_minify(tmp: str, quick: bool) -> dict:
    """The same injected Inductor bug (cpp.inject_relu_bug_TESTING_ONLY=accuracy) on the same
    models: parity (verify detects and writes the repro dir, then minify -j 2) vs PyTorch's
    minifier (TORCHDYNAMO_REPRO_AFTER=aot, REPRO_LEVEL=4, then the launcher's minify). Models:
    ReluNet (tests/python/relu_model.py), the resnet suite model (relus from the stem on), and
    transformer blocks with the only relu late (tests/python/block_model.py)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from block_model import capture_block
    from relu_model import capture_relu
    blocks = 4 if quick else 12
    parity = os.path.join(BUILD, "parity")
    opt = ["--backend", "inductor", "--backend-option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy"]
    out = {"blocks": blocks, "models": {}}
    for model in (["relunet"] if quick else MINIFY_MODELS):
        work = os.path.join(tmp, f"minify-{model}")
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor-parity"),
                   PARITY_CACHE_DIR=os.path.join(work, "parity-cache"), PARITY_WORKER_POOL=os.path.join(work, "pool"))
        env.pop("PARITY_KEEP_WORKERS", None)
        if model == "relunet":
            what = [capture_relu(os.path.join(work, "relunet"), blocks)]
        elif model == "block":
            what = [capture_block(os.path.join(work, "blocknet"))]
        else:
            what = ["--model", model]
        t0 = time.perf_counter()
        # --keep-workers: the verify's worker stays for the minify that follows it ("parity_kept")
        v = subprocess.run([parity, "verify", *what, *opt, "--output-dir", os.path.join(work, "vout"), "--keep-workers", "600"],
                           env=env, capture_output=True, text=True)
        detect_s = time.perf_counter() - t0
        repros = glob.glob(os.path.join(work, "vout", "repros", "*"))
        if len(repros) != 1:
            raise RuntimeError(f"parity verify {model}: expected one failure repro, found {repros}: {v.stdout[-3000:]} {v.stderr[-3000:]}")
        row = {}
        caches = {}
        for key in ("parity", "parity_j2", "parity_fresh"):  # copies of the cache as the verify left it
            caches[key] = os.path.join(work, f"inductor-{key}-minify")
            shutil.copytree(env["TORCHINDUCTOR_CACHE_DIR"], caches[key], dirs_exist_ok=True)
        # parity's minify as a user runs it (`parity minify DIR`: -j 1, a kept runner), then -j 2
        # with each slot's kept runner and with a fresh child per candidate (--fresh-runners, as
        # before issue 33), each from a copy of the Inductor cache the verify left (where a user's
        # minify starts), so none sees another's compiles
        # and first, in the verify's own environment, the minify that adopts the worker it kept
        for key, extra in (("parity_kept", ["-j", "1"]), ("parity", ["-j", "1"]), ("parity_j2", ["-j", "2"]),
                           ("parity_fresh", ["-j", "2", "--fresh-runners"])):
            menv = env if key == "parity_kept" else dict(env, TORCHINDUCTOR_CACHE_DIR=caches[key])
            t0 = time.perf_counter()
            r = subprocess.run([parity, "minify", repros[0], "--out", os.path.join(work, f"pmin-{key}"), *extra],
                               env=menv, capture_output=True, text=True)
            minify_s = time.perf_counter() - t0
            if r.returncode != 0:
                raise RuntimeError(f"parity minify {model}: {r.stderr[-2000:]}")
            s = json.load(open(os.path.join(work, f"pmin-{key}", "summary.json")))
            row["ops_before"] = s["ops_before"]
            row[key] = {"detect_s": detect_s, "minify_s": minify_s, "backend_runs": s["backend_runs"], "final_ops": s["ops_after"],
                        "step_seconds": s.get("step_seconds"),
                        "culprit": s.get("culprit", {}).get("target"), "path": s.get("localization", {}).get("path"),
                        "seconds_per_run": s.get("seconds_per_backend_run"), "runners_started": s.get("runners_started"),
                        "workers_adopted": s.get("workers_adopted")}
            if key == "parity_kept":
                subprocess.run([parity, "workers", "--stop"], env=env, capture_output=True)
        pm = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "pytorch_minifier.py"), "--model", model,
                             "--blocks", str(blocks), "--workdir", os.path.join(work, "pytorch-minifier")],
                            capture_output=True, text=True)
        lines = pm.stdout.strip().splitlines()
        row["pytorch"] = json.loads(lines[-1]) if lines else {"error": pm.stderr[-1500:]}
        out["models"][model] = row
    return out


def render_minify(mn: dict) -> list:
    env = mn["env"]
    ratio = lambda a, b: f"{a / b:.1f}x" if a and b else "-"
    lines = ["## minify: `parity minify` vs PyTorch's minifier", "",
             measured(env) + ", in one run.",
             "Inductor on the CPU with PyTorch's own testing knob `cpp.inject_relu_bug_TESTING_ONLY=accuracy` (relu(x)",
             "computed as x + 1), on three models: `tests/python/relu_model.py` ReluNet with "
             f"{mn['blocks']} blocks (one relu, mid-graph),",
             "the resnet suite model (relus from the stem on), and `tests/python/block_model.py` (two transformer blocks,",
             "the only relu in the head, late in the graph). PyTorch: `TORCHDYNAMO_REPRO_AFTER=aot`,",
             "`TORCHDYNAMO_REPRO_LEVEL=4` (the failing run dumps `minifier_launcher.py`), then `python",
             "minifier_launcher.py minify`. parity: `parity verify` (writes the repro dir), then `parity minify DIR`",
             "(its defaults: -j 1; divergence scan, delta passes, collapse-dims/shrink-shapes, the compiler bisection). Each side has",
             "its own fresh caches; parity's minify starts from the Inductor cache its verify left, as a user's does.",
             "*Worker kept*: the same minify right after a `parity verify --keep-workers 600`, which adopts the Python",
             "worker the verify kept warm (torch imported, Inductor's first compile paid; docs/worker.md), in the",
             "verify's own environment and Inductor cache; the other parity columns start their own worker.", "",
             "| model | ATen ops | detection parity / PyTorch | minify parity | minify parity, worker kept | minify PyTorch "
             "| ratio (PyTorch / parity) | ratio, worker kept | s per run parity / worker kept "
             "| backend runs parity / PyTorch queries | final call_function nodes parity / PyTorch | culprit found by |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, row in mn["models"].items():
        p, t, w = row["parity"], row["pytorch"], row.get("parity_kept")
        kept = f"{w['minify_s']:.1f} s ({w['workers_adopted']} adopted)" if w else "-"
        kept_ratio = ratio(t.get("minify_s"), w["minify_s"]) if w else "-"
        per_run = f"{p['seconds_per_run']:.2f} s / " + (f"{w['seconds_per_run']:.2f} s" if w else "-")
        lines.append(f"| {model} | {row['ops_before']} | {p['detect_s']:.0f} s / {t.get('detect_s', 0):.0f} s "
                     f"| {p['minify_s']:.1f} s | {kept} | {t.get('minify_s', 0):.0f} s "
                     f"| **{ratio(t.get('minify_s'), p['minify_s'])}** | **{kept_ratio}** | {per_run} "
                     f"| {p['backend_runs']} / {t.get('queries')} | {p['final_ops']} ({p['culprit']}) / "
                     f"{t.get('final_call_functions')} | {p['path']} |")
    lines += ["", "A parity backend run is a candidate run as `parity verify` runs an experiment (eager twice, fp64, the",
              "backend with its compile), isolated from the minify process; `seconds_per_backend_run` in the summary is",
              "its cost (the minify's wall time over its backend runs, the compiler bisection included). PyTorch's",
              "queries run the compiled candidate against eager in the launcher's process.", ""]
    if any("parity_j2" in row for row in mn["models"].values()):
        lines += ["With `-j 2`, candidates in each slot's kept runner (the default since issue 33; runs of one experiment,",
                  "the confirmations, in one runner one after another) against a fresh child process per candidate",
                  "(`--fresh-runners`), the same repro dir, each from a copy of the Inductor cache the verify left, same",
                  "run. The divergence scan runs the graph's segments (docs/minify.md); with `-j 2` the first two are made",
                  "ahead with the confirmations and the stage runs. On this machine's two cores `-j 2` is no faster than",
                  "`-j 1`: each slot's worker pays its own start and first compile, and the two share the cores. Where",
                  "the default minify (`-j 1`) spent its time, step by step (`step_seconds` in summary.json; steps under",
                  "0.05 s left out):", "",
                  "| model | `-j 1` (default): minify, s per run | `-j 2` kept runners: minify, s per run, runners started "
                  "| `-j 2` fresh children: minify, s per run | default minify's steps |",
                  "|---|---|---|---|---|"]
        for model, row in mn["models"].items():
            d, k, f = row["parity"], row.get("parity_j2"), row.get("parity_fresh")
            if k and f:
                steps = ", ".join(f"{x['step']} {x['seconds']:.1f} s" for x in d.get("step_seconds") or [] if x["seconds"] >= 0.05)
                lines.append(f"| {model} | {d['minify_s']:.1f} s, {d['seconds_per_run']:.2f} s "
                             f"| {k['minify_s']:.1f} s, {k['seconds_per_run']:.2f} s, {k['runners_started']} "
                             f"| {f['minify_s']:.1f} s, {f['seconds_per_run']:.2f} s | {steps or '-'} |")
        lines.append("")
    return lines


def render(mn: dict) -> list:
    return render_minify(mn) if "models" in mn else []


def run(tmp: str, a, env: dict) -> dict:
    return bench_minify(tmp, a.quick)
