"""Which part of the compiler a failure comes from: PyTorch's compiler bisector
(torch._inductor.compiler_bisector.CompilerBisector) on a repro dir's graph, with parity's test
of the failure instead of an allclose. The worker's `compiler_bisect` request (docs/minify.md).

The bisector walks torch.compile's stages (eager, aot_eager, aot_eager_decomp_partition, its
crossref, inductor), then the failing stage's subsystems (Inductor: pre-grad, joint-graph and
post-grad passes, config toggles such as fallback_random, cudagraphs, lowerings), and bisects
the number of applications of the one that removes the failure. Each try here compiles the graph
freshly with the stage's backend (the last stage with the failing backend itself, so a backend
built on Inductor is bisected inside Inductor) and asks: does it fail the same way? An accuracy
failure is any result that fails same() against eager with the fp64 reference; an exception is
one of the same type. Crashes and hangs are not tried here (each try could take the worker down).
"""
from __future__ import annotations

import contextlib
import io
import time
from typing import Any, Callable, Dict, Optional

import torch

from .backends.python_backends import results_once
from .same import same_tensor

BISECTED_KINDS = ("accuracy", "exception")


def compiler_bisect(req) -> Dict[str, Any]:
    """req: repro, graph, backend (the failing dynamo backend), options, mode, device, seed,
    sgd_lr, tol, equal_nan, ignore_non_fp, signature {kind, exception_type}. Answers
    {"bisected": bool, "why" (when not), "runs", "seconds", "result": null | {backend,
    subsystem, bisect_number, detail}}; a null result: no stage of the bisector fails the same
    way (the failure is not the compiler's, or not in what the bisector knows)."""
    from torch._inductor.compiler_bisector import CompilerBisector
    signature = req.get("signature", {})
    kind = signature.get("kind")
    if kind not in BISECTED_KINDS:
        return {"bisected": False, "why": f"a {kind} failure is not bisected in the worker (a try could take it down)"}
    started = time.perf_counter()
    plain = {**req, "options": {}}
    reference = results_once(plain, None)
    fp64 = results_once(plain, None, torch.float64) if _has_floating(reference) else reference
    runs = {"n": 0}

    def good() -> bool:
        runs["n"] += 1
        stage = CompilerBisector.get_backend() or "inductor"
        theirs = stage in ("inductor", req["backend"])  # the last stage: the failing backend itself
        torch._dynamo.reset()
        try:
            got = results_once(req if theirs else plain, req["backend"] if theirs else stage)
        except Exception as e:
            return not (kind == "exception" and type(e).__name__ == signature.get("exception_type"))
        return kind != "accuracy" or not _fails(reference, got, fp64, req)

    return _bisected(good, req["backend"], runs, started)


def in_step(local_good: Callable[[str], bool], agree: Callable[[bool], bool], backend: str) -> Dict[str, Any]:
    """The bisector run by every rank of a real replay at once (rank_replay's compiler_bisect,
    minifier/across_ranks.h): each try is `local_good(stage)` on this rank (its graphs compiled
    with the stage, run, judged), and the bisector is told `agree(that)`, every rank's answer
    combined (a pass only where every rank passes), so every rank walks the same path and its
    compiled graphs issue the same collectives. Answers as compiler_bisect does."""
    from torch._inductor.compiler_bisector import CompilerBisector
    started = time.perf_counter()
    runs = {"n": 0}

    def good() -> bool:
        runs["n"] += 1
        torch._dynamo.reset()
        return agree(local_good(CompilerBisector.get_backend() or "inductor"))

    return _bisected(good, backend, runs, started)


def _bisected(good: Callable[[], bool], backend: str, runs: Dict[str, int], started: float) -> Dict[str, Any]:
    """PyTorch's bisector over `good`, its answer with the failing backend's name for Inductor's
    last stage and the config line that removes the failure where one does."""
    from torch._inductor.compiler_bisector import CompilerBisector
    with _quiet():  # the bisector prints its progress
        result = CompilerBisector.do_bisect(good)
    torch._dynamo.reset()
    out: Dict[str, Any] = {"bisected": True, "runs": runs["n"], "seconds": time.perf_counter() - started, "result": None}
    if result is not None:
        out["result"] = {"backend": backend if result.backend == "inductor" else result.backend, "subsystem": result.subsystem,
                         "bisect_number": result.bisect_number, "detail": result.debug_info, "config": _config_line(result)}
    return out


def _has_floating(results: Dict[str, torch.Tensor]) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in results.values())


def _fails(reference, got, fp64, req) -> bool:
    """Whether `got` fails the check parity's accuracy failure failed (same(), per output)."""
    if set(got) != set(reference):
        return True
    for name, ref in reference.items():
        ok, _, _ = same_tensor(ref, got[name], fp64.get(name), tol=float(req.get("tol", 1e-4)),
                               equal_nan=bool(req.get("equal_nan", True)), ignore_non_fp=bool(req.get("ignore_non_fp", False)))
        if not ok:
            return True
    return False


def _config_line(result) -> Optional[str]:
    """A line of Python that removes the failure where one config setting does: a config
    toggle the bisector found, or a custom pass set in Inductor's config (its name is the detail
    of a pass subsystem)."""
    from torch._inductor.compiler_bisector import BACKENDS, ConfigChange
    import torch._inductor.config as cfg
    for sub in BACKENDS.get(result.backend, []):
        if isinstance(sub, ConfigChange) and sub.name == result.subsystem:
            module = "torch._inductor.config" if sub.config_name == "inductor" else f"{sub.config_name} config"
            return f"{module}.{sub.config_field} = {sub.config_value!r}"
    detail = result.debug_info or ""
    if (result.subsystem or "").endswith("_passes") and "custom" in detail and hasattr(cfg, detail):
        return f"torch._inductor.config.{detail} = None"
    return None


@contextlib.contextmanager
def _quiet():
    with contextlib.redirect_stdout(io.StringIO()):
        yield
