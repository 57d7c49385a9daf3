"""Symbolic shapes on a GPU (issue 22), after scripts/gpu_build.sh: a bf16 inference program on
CUDA called with batches of 8, 8, 5 and 3 rows (dynamo recompiles with a symbolic batch) and a
dynamic=True program are captured with the dump backend; `parity verify` checks every graph with
Inductor at the recorded shapes and with `--shapes sweep`, and Inductor's Triton relu bug is
minified on the symbolic graph with no flags. Prints one line per step; JSON under $OUT.

    python scripts/gpu_shapes.py [PARITY_BIN]
"""
import json
import os
import subprocess
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from parity_capture import dump_backend  # noqa: E402

PARITY = sys.argv[1] if len(sys.argv) > 1 else "build-gpu/parity"
OUT = os.environ.get("OUT", "gpu-out")


class Block(torch.nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = x + self.down(torch.relu(self.up(self.norm(x))))
        return h.reshape(-1).view(x.shape[0], -1).sum(dim=1)


def dump(d, batches, **kw):
    torch.manual_seed(0)
    model = Block().cuda().to(torch.bfloat16).eval()
    xs = [torch.randn(n, 64, 256, device="cuda", dtype=torch.bfloat16) for n in batches]
    with torch.no_grad():
        want = [model(x) for x in xs]
        torch._dynamo.reset()
        f = torch.compile(model, backend=dump_backend(d), **kw)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [f(x) for x in xs]
    torch._dynamo.reset()
    same = all(torch.equal(a, b) for a, b in zip(want, got))
    m = json.load(open(os.path.join(d, "manifest.json")))
    print(f"capture {os.path.basename(d)}: graphs {[g['name'] for g in m['graphs']]} device {m['device']} dtype {m['dtype']} "
          f"warnings {len(caught)} program outputs unchanged {same}", flush=True)


def parity(*args):
    t0 = time.perf_counter()
    r = subprocess.run([PARITY, *args], capture_output=True, text=True)
    return r, time.perf_counter() - t0


def verify(name, d, *args):
    out = os.path.join(OUT, name)
    r, dt = parity("verify", d, "--output-dir", out, *args)
    recs = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))] if os.path.exists(os.path.join(out, "results.jsonl")) else []
    for rec in recs:
        shapes = [(s["graph"], s["symbols"], s["pass"]) for s in rec.get("shapes", [])]
        print(f"verify {name}: exit {r.returncode} {rec['verification_code']} {rec['experiment']['accelerator']} "
              f"{rec['experiment']['dtype']} tol {rec['tolerance']} fp64 {rec.get('fp64_reference')} {dt:.1f}s shapes {shapes} "
              f"{rec.get('error', '')[:200]}", flush=True)
    if not recs:
        print(f"verify {name}: exit {r.returncode} {r.stderr[-500:]}", flush=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    tmp = os.path.join(OUT, "dirs")
    last = os.path.join(tmp, "lastbatch")
    dyn = os.path.join(tmp, "dynamic")
    dump(last, [8, 8, 5, 3])
    dump(dyn, [6], dynamic=True)
    verify("lastbatch", last, "--backend", "inductor")
    verify("dynamic-sweep", dyn, "--backend", "inductor", "--shapes", "sweep=3")
    bug = ["--backend", "inductor", "--backend-option", "triton.inject_relu_bug_TESTING_ONLY=accuracy"]
    verify("relu-bug", dyn, *bug)
    repros = os.path.join(OUT, "relu-bug", "repros")
    for d in sorted(os.listdir(repros)) if os.path.isdir(repros) else []:
        r, dt = parity("minify", os.path.join(repros, d), "--out", os.path.join(OUT, "minify"), "-j", "2")
        s = json.load(open(os.path.join(OUT, "minify", "summary.json"))) if r.returncode == 0 else {}
        print(f"minify {d}: exit {r.returncode} {dt:.1f}s culprit {[c['target'] for c in s.get('culprit_ops', [])]} "
              f"device {s.get('device', '?')} {r.stderr[-300:] if r.returncode else ''}", flush=True)
        if r.returncode == 0:
            p = subprocess.run([sys.executable, os.path.join(s["minified_dir"], "repro.py")], capture_output=True, text=True)
            print(f"repro.py: exit {p.returncode} {p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-300:]}")


if __name__ == "__main__":
    main()
