"""The symbolic-shapes check written in Python, the way one would by hand: a model compiled once
with torch.compile(dynamic=True), and at each of several batch sizes eager twice with a reset
seed (bitwise), an fp64 deepcopy reference, the compiled run, and torch._dynamo.utils.same.
Prints the verdict per size.

    python bench/shapes_flow.py --points 6,32 3,16 12,64 9,48    # check at (batch, seq) points
    python bench/shapes_flow.py --capture DIR --points 6,32      # record the symbolic graph for parity
"""
import argparse
import copy
import sys
import time

t_start = time.perf_counter()
import torch  # noqa: E402
from torch._dynamo.utils import same  # noqa: E402


class Block(torch.nn.Module):
    """A pre-norm transformer MLP block over (batch, seq, width), applied `depth` times."""

    def __init__(self, width: int = 256, depth: int = 4):
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(depth))
        self.ups = torch.nn.ModuleList(torch.nn.Linear(width, 4 * width) for _ in range(depth))
        self.downs = torch.nn.ModuleList(torch.nn.Linear(4 * width, width) for _ in range(depth))

    def forward(self, x):
        for norm, up, down in zip(self.norms, self.ups, self.downs):
            x = x + down(torch.nn.functional.gelu(up(norm(x))))
        return x.mean(dim=1)


def build():
    torch.manual_seed(0)
    return Block().eval()


def inputs(point: str, width: int = 256):
    batch, seq = (int(v) for v in point.split(","))
    g = torch.Generator().manual_seed(batch * 1000 + seq)
    return torch.randn(batch, seq, width, generator=g)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", nargs="+", default=["6,32", "3,16", "12,64", "9,48"], help="batch,seq")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--capture", help="record the model's symbolic graph into this repro dir instead")
    a = ap.parse_args()
    model = build()
    if a.capture:
        from parity_capture import dump_backend
        compiled = torch.compile(model, backend=dump_backend(a.capture), dynamic=True)
        with torch.no_grad():
            compiled(inputs(a.points[0]))
        return 0
    import torch._inductor.config as cfg
    cfg.fallback_random = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    compiled = torch.compile(model, backend=a.backend, dynamic=True)
    fp64_model = copy.deepcopy(model).double()

    def run(m, x):
        torch.manual_seed(1337)
        with torch.no_grad():
            return m(x)

    ok_all = True
    for n in a.points:
        x = inputs(n)
        ref, ref2 = run(model, x), run(model, x)
        if not same(ref, ref2, tol=0, equal_nan=True):
            print(n, "NONDETERMINISTIC_EAGER_RUN")
            ok_all = False
            continue
        fp64 = run(fp64_model, x.double())
        ok = same(ref, run(compiled, x), fp64_ref=fp64, tol=a.tol, equal_nan=True)
        print(n, "PASS" if ok else "FAIL")
        ok_all = ok_all and ok
    print("PASS" if ok_all else "FAIL", f"{time.perf_counter() - t_start:.1f}s")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
