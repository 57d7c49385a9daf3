"""PyTorch's own op database as parity's yardstick (issue 30): every OpInfo sample that Python
eager runs on the CPU is captured as a repro dir (the op applied to the sample's tensors, the
eager outputs stored), replayed by parity's interpreter (`parity repro run --json`, with its fp64
reference) and compared with the stored eager outputs. Nothing here was written for parity:
the samples are `torch.testing._internal.common_methods_invocations.op_db`.

    .venv/bin/python bench/opinfo.py --parity build/parity [--samples 1] [--dtypes float32 bfloat16]
                                     [--ops NAME ...] [--limit N] [--jobs 2] [--json OUT] [--markdown]

Each sample's forward runs in each dtype, and its backward (the gradients of its outputs with
respect to its floating inputs, traced into the graph) in float32 where the OpInfo supports
autograd. Each ends in one class: `python_fails` (Python eager raises: not counted), `no_backward`
(a backward sample with no floating input: not counted), `no_tensor_input` (sizes in, sizes out,
as broadcast_shapes: no tensor for a graph to compute on; not counted), `no_output` (nothing a graph could return),
`capture_failed`, `replay_failed` (parity refuses the dir or the run raises), `mismatch`,
`match_random` (an output drawn from random numbers: shape, dtype and layout agree), `match_same`
(within same()), `match_bitwise` (identical bytes, NaN included). `fp64` says whether the float64
reference ran, for samples whose op Python runs in float64. tests/python/test_opinfo.py runs a
fixed sample through the same functions.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import torch
import torch.utils._pytree as pytree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from parity_capture import capture  # noqa: E402

MATCHES = ("match_bitwise", "match_same", "match_random")
# Nothing to replay: Python raises, no gradient exists, or the sample holds no tensor at all.
NOT_COUNTED = ("python_fails", "no_backward", "no_tensor_input")


class OpCall(torch.nn.Module):
    """op(sample.input, *sample.args, **sample.kwargs) with the sample's tensors as inputs (the
    rest of the sample stays constant in the graph)."""

    def __init__(self, op, sample):
        super().__init__()
        self.op = op
        leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.positions = [k for k, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        self.leaves = [None if k in self.positions else v for k, v in enumerate(leaves)]
        self.tensors = [leaves[k] for k in self.positions]

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for k, t in zip(self.positions, tensors):
            leaves[k] = t
        x, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(x, *args, **kwargs)


class OpGrad(OpCall):
    """The gradients of OpCall's floating tensor outputs (tangent: ones) with respect to its
    floating tensor inputs, computed inside the graph: the recorded graph holds the backward's
    ATen ops, so the replay checks them against Python eager's gradients like any output."""

    def forward(self, *tensors):
        floating = [k for k, t in enumerate(tensors) if t.is_floating_point()]

        def f(*wrt):
            ts = list(tensors)
            for k, t in zip(floating, wrt):
                ts[k] = t
            return [o for o in pytree.tree_leaves(OpCall.forward(self, *ts))
                    if isinstance(o, torch.Tensor) and o.is_floating_point()]

        # torch.func.vjp composes with the functionalization the capture traces under
        outs, pullback = torch.func.vjp(f, *[tensors[k] for k in floating])
        return list(pullback([torch.ones_like(o) for o in outs]))


def samples(op, dtype: torch.dtype, count: int):
    try:
        it = op.sample_inputs("cpu", dtype, requires_grad=False)
        out = []
        for s in it:
            out.append(s)
            if len(out) >= count:
                break
        return out
    except Exception:
        return []


def prepare(op, dtype: torch.dtype, k: int, sample, out_dir: str, grad: bool = False, export: bool = True) -> Dict[str, Any]:
    """Python eager, then the capture: the row of one sample, with "dir" when there is one to
    replay. `grad`: the sample's backward (OpGrad) instead of its forward, traced by make_fx
    (torch.export does not trace autograd.grad); a forward is captured by torch.export, or by
    make_fx where not `export` (25x faster: about 0.01 s a sample against 0.26 s)."""
    row = {"op": op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""), "dtype": str(dtype)[6:],
           "sample": k, "fp64_in_python": torch.float64 in op.supported_dtypes("cpu"), "pass": "backward" if grad else "forward"}
    model = (OpGrad if grad else OpCall)(op, sample)
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            out = model(*[t.detach() for t in model.tensors])
    except Exception as e:
        return dict(row, cls="python_fails", why=_why(e))
    if grad and not any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(out)):
        return dict(row, cls="no_backward", why="no floating input to differentiate")
    if not model.tensors and not any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(out)):
        # broadcast_shapes: sizes in, sizes out; no tensor anywhere, nothing a graph computes
        return dict(row, cls="no_tensor_input", why=type(out).__name__)
    if not any(isinstance(v, (torch.Tensor, bool, int, float)) for v in pytree.tree_leaves(out)):
        return dict(row, cls="no_output", why=type(out).__name__)
    d = os.path.join(out_dir, f"{row['op']}-{row['dtype']}-{row['pass']}-{k}".replace("/", "_"))
    try:
        torch.manual_seed(0)
        capture(model, [t.detach() for t in model.tensors], d, name=row["op"], method="export" if export and not grad else "make_fx")
    except Exception as e:
        shutil.rmtree(d, ignore_errors=True)
        return dict(row, cls="capture_failed", why=_why(e))
    return dict(row, dir=d)


def replay(parity: str, row: Dict[str, Any]) -> Dict[str, Any]:
    """`parity repro run --json` of the row's dir: its class and whether fp64 ran."""
    r = subprocess.run([parity, "repro", "run", row["dir"], "--json"], capture_output=True, text=True)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        return dict(row, cls="replay_failed", why=(r.stderr.strip().splitlines() or ["?"])[-1][-200:])
    return classify(row, report)


# Dirs per `parity repro run` process: libtorch's start-up (about 0.3 s on a 2-core CPU) paid once
# for them instead of once per dir.
BATCH = 16


def replay_batch(parity: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows' dirs replayed by one `parity repro run DIR... --json` (a line per dir); the dirs
    after one that took the process down, one by one."""
    r = subprocess.run([parity, "repro", "run", *[row["dir"] for row in rows], "--json"], capture_output=True, text=True)
    reports = []
    for line in r.stdout.splitlines():
        try:
            reports.append(json.loads(line))
        except ValueError:
            break
    done = [classify(row, report) for row, report in zip(rows, reports)]
    return done + [replay(parity, row) for row in rows[len(done):]]


def classify(row: Dict[str, Any], report: Dict[str, Any]) -> Dict[str, Any]:
    """The row's class from its dir's `repro run` report."""
    if "graphs" not in report:  # the dir ended in an error (several dirs: {"dir", "error", "exit_status"})
        return dict(row, cls="replay_failed", why=report.get("error", "?")[-200:])
    (g,) = report["graphs"]
    row = dict(row, fp64=bool(g.get("fp64_reference")))
    if g.get("error"):
        return dict(row, cls="replay_failed", why=g["error"][:200])
    rules = [o["rule"] for o in g["outputs"]]
    if not g["pass"]:
        bad = next(o for o in g["outputs"] if not o["pass"])
        return dict(row, cls="mismatch", why=f"{bad['rule']}: {bad.get('message', '')}"[:200])
    if all(x == "bitwise" for x in rules):
        return dict(row, cls="match_bitwise")
    return dict(row, cls="match_random" if "random" in rules else "match_same")


def run(parity: str, ops, dtypes: List[torch.dtype], count: int, jobs: int, work: str,
        backward: bool = True, export_when=None) -> List[Dict[str, Any]]:
    """Every sample's forward in each dtype, and its backward in float32 where the op supports
    autograd: captured here one after another, replayed BATCH dirs to a process, `jobs` processes
    at once, while the captures go on. `export_when(op, dtype)`: whether torch.export captures
    that forward (None: every one), else make_fx does."""
    rows, pending, batch = [], [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for op in ops:
            for dtype in dtypes:
                if dtype not in op.supported_dtypes("cpu"):
                    continue
                grads = [False, True] if backward and dtype == torch.float32 and op.supports_autograd else [False]
                for k, sample in enumerate(samples(op, dtype, count)):
                    for grad in grads:
                        row = prepare(op, dtype, k, sample, work, grad, export_when is None or export_when(op, dtype))
                        if "dir" not in row:
                            rows.append(row)
                            continue
                        batch.append(row)
                        if len(batch) == BATCH:
                            pending.append(pool.submit(replay_batch, parity, batch))
                            batch = []
        if batch:
            pending.append(pool.submit(replay_batch, parity, batch))
        rows += [row for f in pending for row in f.result()]
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    """The coverage table and the failure classes, as docs/benchmarks.md shows them."""
    lines = []
    for dtype, which in sorted({(r["dtype"], r["pass"]) for r in rows}, key=lambda x: (x[0] != "float32", x)):
        rs = [r for r in rows if r["dtype"] == dtype and r["pass"] == which]
        counted = [r for r in rs if r["cls"] not in NOT_COUNTED]
        c = collections.Counter(r["cls"] for r in counted)
        replayed = [r for r in counted if r["cls"] in MATCHES + ("mismatch",)]
        matched = sum(c[m] for m in MATCHES)
        want64 = [r for r in replayed if r["fp64_in_python"]]
        ran64 = sum(1 for r in want64 if r.get("fp64"))
        pct = lambda n, d: f"{n} ({100.0 * n / d:.1f}%)" if d else "0"
        lines.append(f"| {dtype} {which} | {len({r['op'] for r in rs})} | {len(counted)} | {pct(len(replayed), len(counted))} | "
                     f"{pct(matched, len(counted))} | {c['match_bitwise']} | {c['match_same']} | {c['match_random']} | "
                     f"{pct(ran64, len(want64))} |")
    head = ("| dtype, pass | OpInfos | samples Python runs | parity replays | match | bitwise | within same() | random "
            "(shape/dtype) | fp64 reference runs (where Python's float64 does) |\n|---|---|---|---|---|---|---|---|---|\n")
    fails = [r for r in rows if r["cls"] not in MATCHES + NOT_COUNTED]
    out = head + "\n".join(lines) + "\n"
    if fails:
        out += "\n| op | dtype | class | why |\n|---|---|---|---|\n"
        out += "\n".join(f"| `{r['op']}` | {r['dtype']} {r['pass']} | {r['cls']} | {r.get('why', '').replace('|', '/')[:120]} |"
                         for r in sorted(fails, key=lambda r: (r["cls"], r["op"]))) + "\n"
    no64 = [r for r in rows if r["cls"] in MATCHES and r["fp64_in_python"] and not r.get("fp64")]
    if no64:
        out += "\nfp64 reference did not run: " + ", ".join(sorted({f"`{r['op']}`" for r in no64})) + "\n"
    return out


def _why(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:200]


def select_ops(names: Optional[List[str]], limit: Optional[int]):
    from torch.testing._internal.common_methods_invocations import op_db
    ops = [op for op in op_db if not names or op.name in names]
    return ops[:limit] if limit else ops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parity", default=os.path.join(ROOT, "build", "parity"))
    ap.add_argument("--samples", type=int, default=1, help="samples per OpInfo and dtype")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--ops", nargs="*", help="only these OpInfo names")
    ap.add_argument("--limit", type=int, help="the first N OpInfos")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-backward", action="store_true", help="forwards only")
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("--markdown", action="store_true", help="print the coverage table")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ops = select_ops(a.ops, a.limit)
    work = tempfile.mkdtemp(prefix="parity-opinfo-")
    t0 = time.time()
    try:
        rows = run(a.parity, ops, [getattr(torch, d) for d in a.dtypes], a.samples, a.jobs, work, not a.no_backward)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "seconds": time.time() - t0, "torch": torch.__version__}, f, indent=1)
    print(table(rows) if a.markdown else json.dumps(collections.Counter(r["cls"] for r in rows)))
    print(f"{len(ops)} OpInfos, {len(rows)} samples in {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
