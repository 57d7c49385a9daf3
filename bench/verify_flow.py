"""The verification flow written in Python, the way PyTorch's benchmark runner does it: eager
twice with a reset seed (bitwise comparison), an fp64 deepcopy reference, torch.compile with the
backend, then torch._dynamo.utils.same (by cosine similarity when the fp64 copy cannot run). One
model, one backend, eval. Prints the verdict.

    python bench/verify_flow.py --model llama --backend inductor
"""
import argparse
import copy
import sys
import time

t_start = time.perf_counter()
import torch  # noqa: E402
from torch._dynamo.utils import same  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    from parity_capture import models
    import torch._inductor.config as cfg
    cfg.fallback_random = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    spec, model, args, kwargs = models.build(a.model)
    model.eval()

    def run(m, xs, kw):
        torch.manual_seed(1337)
        with torch.no_grad():
            out = m(*xs, **kw)
        return [v for v in torch.utils._pytree.tree_leaves(out) if isinstance(v, torch.Tensor)]

    ref = run(model, args, kwargs)
    ref2 = run(model, args, kwargs)
    if not same(ref, ref2, tol=0, equal_nan=True):
        print("NONDETERMINISTIC_EAGER_RUN")
        return 1
    to64 = lambda x: x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    try:
        fp64 = run(copy.deepcopy(model).double(), [to64(x) for x in args], {k: to64(v) for k, v in kwargs.items()})
    except Exception:  # as the runner does: no fp64 reference, compare by cosine similarity
        fp64 = None
    compiled = torch.compile(model, backend=a.backend)
    res = run(compiled, args, kwargs)
    ok = same(ref, res, fp64_ref=fp64, cos_similarity=fp64 is None, tol=a.tol, equal_nan=True)
    print("PASS" if ok else "FAIL", f"{time.perf_counter() - t_start:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
