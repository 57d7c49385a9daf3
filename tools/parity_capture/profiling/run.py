"""The profile of one graph, eager and the backend: the steps the child runs."""
from __future__ import annotations

import functools
import os
import time
from typing import Any, Dict

import torch

from .categories import _GRAPH_PREFIX, generated_kernels, is_matmul_conv
from .provenance import Provenance
from .timing import _peak_memory, _stats, _sync, _timed
from .kineto import _profile, classify, profile_rows
from .trace import merge_traces
from .compile import _compile
from .kernel import bench_kernel
from .. import checkpointed, warm


def run_profile(req: Dict[str, Any]) -> Dict[str, Any]:
    from torch._inductor.utils import run_and_get_code

    import importlib

    from ..runs import device_inputs, device_tangents, iteration, load_graph
    for m in req.get("imports", []):
        importlib.import_module(m)
    device = req.get("device", "cpu")
    train = req.get("mode") == "train"
    backend, options = req["backend"], req.get("options", {})
    warmup, iters = int(req.get("warmup", 3)), int(req.get("iterations", 20))
    prof_iters = int(req.get("profile_iterations", 5))
    _, g = load_graph(req)
    gm = g.module_on(device)
    inputs = device_inputs(g, device, train)
    tangents = device_tangents(g, device, train)
    sync = _sync(device)
    result: Dict[str, Any] = {"device": device, "backend": backend, "graph": g.name, "torch_version": torch.__version__,
                              "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"}
    trace_parts = []
    tmp_dir = req.get("scratch") or os.path.dirname(os.path.abspath(req.get("trace") or "."))

    # Eager: the captured ATen graph run op by op, its checkpoint calls as the program ran them.
    eager = iteration(checkpointed.as_eager_calls(gm), inputs, train, tangents)
    _timed(eager, sync, warmup)
    result["eager"] = _stats(_timed(eager, sync, iters))
    result["eager"]["peak_mem_bytes"] = _peak_memory(eager, device, sync)
    eager_trace = os.path.join(tmp_dir, "eager.trace.json") if req.get("trace") else None
    prof, wall = _profile(eager, device, sync, prof_iters, eager_trace)
    result["eager_profile"] = dict(profile_rows(prof, device, prof_iters), iterations=prof_iters, wall_ms=wall)
    if eager_trace:
        trace_parts.append(("eager", eager_trace))

    # The backend: compiled once (timed), then warm iterations.
    if backend == "inductor" and not device.startswith("cuda"):
        warm.pick_cpu_isa()  # with the caches on: the compile below has them off
    torch._dynamo.reset()
    provenance = Provenance()
    compiled, config = _compile(gm, backend, options, profiling=True)
    step = iteration(compiled, inputs, train, tangents)
    with config(), provenance.collecting():
        t0 = time.perf_counter()
        if backend == "inductor":
            _, codes = run_and_get_code(step)
        else:
            step()
            codes = []
        sync()
        result["backend"] = {"compile_s": time.perf_counter() - t0}
        _timed(step, sync, warmup)
        result["backend"].update(_stats(_timed(step, sync, iters)))
        result["backend"]["peak_mem_bytes"] = _peak_memory(step, device, sync)
        backend_trace = os.path.join(tmp_dir, "backend.trace.json") if req.get("trace") else None
        prof, wall = _profile(step, device, sync, prof_iters, backend_trace)
        if backend_trace:
            trace_parts.append((f"backend {backend}", backend_trace))
        kernels = generated_kernels(codes)

        @functools.lru_cache(maxsize=None)  # asked for every event and each of its ancestors
        def known(name, phase):
            return (_GRAPH_PREFIX.sub("", name) in kernels[phase] or provenance.lookup(name, phase) is not None
                    or is_matmul_conv(name))
        rows = profile_rows(prof, device, prof_iters, known)
        classify(rows["rows"], kernels, provenance)
        result["profile"] = dict(rows, iterations=prof_iters, wall_ms=wall)
        result["kernels"] = kernels
        result["provenance"] = provenance.answered
        if req.get("kernel"):
            result["kernel_bench"] = bench_kernel(req, gm, inputs, train, tangents, sync, step, kernels, provenance)
    if req.get("trace"):
        merge_traces(trace_parts, req["trace"])
        for _, p in trace_parts:
            os.unlink(p)
        result["trace"] = req["trace"]
    return result
