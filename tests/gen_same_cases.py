"""Generates the same() conformance corpus: (ref, res, fp64_ref, options) cases and the verdict
torch._dynamo.utils.same gives on each, with the venv's torch.

Writes OUT/same_cases.safetensors (case<i>/ref, case<i>/res, case<i>/fp64) and
OUT/same_cases.json (options and expected verdict per case)."""
from __future__ import annotations

import json
import logging
import os
import random
import sys

import torch
from safetensors.torch import save_file
from torch._dynamo.utils import same

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.uint8]
SHAPES = [(1,), (7,), (3, 5), (999,), (1000,), (40, 50), (2, 3, 1, 1), (4, 8, 16), (0,)]
TOLS = [1e-4, 1e-3, 1e-2, 4e-2, 0.0]


def perturb(ref: torch.Tensor, kind: str, tol: float, rng: random.Random, g: torch.Generator) -> torch.Tensor:
    r = ref.clone()
    n = r.numel()
    if n == 0 or kind == "equal":
        return r
    idx = rng.randrange(n)
    flat = r.view(-1)
    if kind == "near_allclose":
        # One element moved to just inside / at / just outside atol + rtol*|res|.
        factor = rng.choice([0.5, 0.999, 1.0, 1.001, 1.5])
        v = float(flat[idx])
        step = (tol + tol * abs(v)) * factor * rng.choice([-1, 1])
        flat[idx] = v + step
        return r
    if kind == "noise":
        scale = rng.choice([1e-7, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1])
        noise = torch.randn(r.shape, generator=g, dtype=torch.float64) * scale
        return (r.double() + noise).to(r.dtype)
    if kind == "one_big":
        flat[idx] = float(flat[idx]) + rng.choice([1.0, 10.0, -5.0])
        return r
    if kind == "nan":
        flat[idx] = float("nan")
        return r
    if kind == "inf":
        flat[idx] = rng.choice([float("inf"), float("-inf")])
        return r
    raise ValueError(kind)


def make_case(i: int, rng: random.Random, g: torch.Generator):
    category = rng.choice(["float", "float", "float", "float", "rmse", "rmse", "int", "bool", "cos", "dtype"])
    shape = rng.choice(SHAPES)
    tol = rng.choice(TOLS)
    opts = dict(tol=tol, equal_nan=rng.random() < 0.4, cos_similarity=False, exact_dtype=True,
                ignore_non_fp=rng.random() < 0.15, use_larger_multiplier_for_smaller_tensor=rng.random() < 0.2,
                force_max_multiplier=rng.random() < 0.1, use_iou_for_bool=False)
    fp64 = None
    if category in ("float", "cos", "dtype"):
        dt = rng.choice(FLOATS)
        base = torch.randn(shape, generator=g, dtype=torch.float64) * rng.choice([1e-3, 1.0, 100.0])
        ref = base.to(dt)
        res = perturb(ref, rng.choice(["equal", "near_allclose", "near_allclose", "noise", "one_big", "nan", "inf"]), tol, rng, g)
        if rng.random() < 0.3:  # NaN/Inf in ref too, sometimes in the same place
            ref = perturb(ref, rng.choice(["nan", "inf"]), tol, rng, g)
            if rng.random() < 0.5:
                res = torch.where(torch.isnan(ref) | torch.isinf(ref), ref, res)
        if rng.random() < 0.6:
            fp64 = base.clone()
        if category == "cos":
            opts["cos_similarity"] = True
        if category == "dtype":
            res = res.to(rng.choice(FLOATS))
            opts["exact_dtype"] = rng.random() < 0.5
    elif category == "rmse":
        # ref and res both noisy around the fp64 truth; res error ~ multiplier x ref error.
        dt = rng.choice(FLOATS)
        n = int(torch.tensor(shape).prod()) if shape else 1
        base = torch.randn(shape, generator=g, dtype=torch.float64)
        ref_noise = rng.choice([1e-4, 1e-3, 1e-2])
        ratio = rng.choice([0.5, 1.0, 1.9, 2.0, 2.1, 2.9, 3.0, 3.1, 7.9, 8.1, 9.9, 10.1, 20.0])
        ref = (base + torch.randn(shape, generator=g, dtype=torch.float64) * ref_noise).to(dt)
        res = (base + torch.randn(shape, generator=g, dtype=torch.float64) * ref_noise * ratio).to(dt)
        if rng.random() < 0.15 and n > 0:
            ref.view(-1)[0] = float("nan")  # the NaN escape
        fp64 = base
        opts["tol"] = rng.choice([1e-5, 1e-4, 1e-3, 2e-2])
    elif category == "int":
        dt = rng.choice(INTS)
        ref = torch.randint(0, 100, shape, generator=g).to(dt)
        res = ref.clone()
        if ref.numel() and rng.random() < 0.6:
            res.view(-1)[rng.randrange(ref.numel())] += rng.choice([1, 2, 50])
        fp64 = ref.clone() if rng.random() < 0.5 else None
        opts["tol"] = rng.choice([0.0, 1e-4, 1e-2, 0.5])
    else:  # bool
        ref = torch.rand(shape, generator=g) > 0.5
        res = ref.clone()
        if ref.numel() and rng.random() < 0.6:
            flips = max(1, int(ref.numel() * rng.choice([0.001, 0.01, 0.2])))
            for _ in range(flips):
                j = rng.randrange(ref.numel())
                res.view(-1)[j] = ~res.view(-1)[j]
        opts["use_iou_for_bool"] = rng.random() < 0.5
    return category, ref, res, fp64, opts


def main(out_dir: str, count: int = 640) -> None:
    logging.getLogger("torch._dynamo.utils").setLevel(logging.CRITICAL)
    rng = random.Random(20261122)
    g = torch.Generator().manual_seed(7)
    tensors, cases = {}, []
    quiet = lambda *a, **k: None
    while len(cases) < count:
        i = len(cases)
        category, ref, res, fp64, opts = make_case(i, rng, g)
        try:
            verdict = bool(same(ref, res, fp64_ref=fp64, log_error=quiet, **opts))
        except Exception:
            continue  # same() raises on this combination: not a verdict to match
        tensors[f"case{i}/ref"] = ref.contiguous()
        tensors[f"case{i}/res"] = res.contiguous()
        if fp64 is not None:
            tensors[f"case{i}/fp64"] = fp64.contiguous()
        cases.append({"id": i, "category": category, "options": opts, "has_fp64": fp64 is not None,
                      "expected": verdict})
    os.makedirs(out_dir, exist_ok=True)
    save_file(tensors, os.path.join(out_dir, "same_cases.safetensors"))
    with open(os.path.join(out_dir, "same_cases.json"), "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=0)
    by = {}
    for c in cases:
        by.setdefault(c["category"], [0, 0])[c["expected"]] += 1
    print(f"same() corpus: {len(cases)} cases; fail/pass per category: {by}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 640)
