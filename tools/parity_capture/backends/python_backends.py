"""The Python side of experiment/backends/python_backends.cpp: a dynamo backend run by torch.compile
in the worker (inductor, any registered backend: `run`), and the graph AOTAutograd hands its
compiler, as a repro dir parity's interpreter runs (`aot_graphs`)."""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Optional

import torch

from ..contract import SEED, SGD_LR, inductor_settings, train_results
from ..runs import device_inputs, device_tangents, iteration, load_graph, write_tensors
from ..standalone import Handoff, backend_compile, default_dtype, in_run_dtype, parse_option, static_tracing


def _inductor_config(options: Dict[str, Any]):
    import torch._inductor.config as cfg
    return cfg.patch(inductor_settings(options))


def _compile(gm: torch.fx.GraphModule, backend: str, options: Dict[str, Any], symbolic: bool):
    """A static graph goes straight to the backend (standalone.Handoff, which repro.py uses
    too); a symbolic one through torch.compile(dynamic=True), whose dynamo makes the ShapeEnv the
    backend compiles against."""
    if not symbolic:
        return Handoff(gm, backend, options)
    kw = {"options": options} if options else {}
    return torch.compile(gm, backend=backend, fullgraph=True, dynamic=True, **kw)


def run(req) -> Dict[str, Any]:
    """Compiles the request's graph with its dynamo backend and runs it. A symbolic graph is
    compiled as dynamic (as the program's compile saw it); with "variants" (the same graph at
    other shapes, --shapes sweep) that one compile runs each of them too, and each variant's
    results go to its own "out"."""
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    train = req.get("mode") == "train"
    backend = req["backend"]
    options = req.get("options", {})
    gm = g.module_on(device)
    iters = max(1, int(req.get("iterations", 1)))
    # Inductor's settings are its config keys; any other dynamo backend gets them as kwargs.
    inductor = backend == "inductor"
    ctx = _inductor_config(options) if inductor else contextlib.nullcontext()
    backend_options = {} if inductor else {k: parse_option(v) for k, v in options.items()}
    torch._dynamo.reset()
    _KEPT.clear()
    with ctx:
        compiled = _compile(gm, backend, backend_options, g.symbolic())
        first = _run_compiled(compiled, gm, g, device, train, iters, req)
    if req.get("keep"):  # its timed runs come later, in their own request (time_runs)
        inputs = device_inputs(g, device, train)
        _KEPT.update(compiled=compiled, options=options if inductor else None, inputs=inputs, device=device, train=train,
                     tangents=device_tangents(g, device, train), fresh_grads=[*gm.parameters(), *inputs])
    with ctx:
        for v in req.get("variants", []):
            vreq = {**req, **v}
            _, vg = load_graph(vreq)
            if train:  # each variant from its own parameters (one SGD step each), compiled once
                vgm = vg.module_on(device)
                res = _run_compiled(_compile(vgm, backend, backend_options, True), vgm, vg, device, train, 1, vreq)
            else:
                res = _run_compiled(compiled, gm, vg, device, train, 1, vreq)
            first.setdefault("variants", []).append(res)
    return first


# What the last `run` with "keep" compiled, for its `time_runs`: the compiled callable, its
# inputs, where and how it ran.
_KEPT: Dict[str, Any] = {}


def _sync(device: str):
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def _timed_calls(compiled, inputs, device: str, train: bool, n: int, tangents=(), fresh_grads=()):
    """n iterations of `compiled` on `inputs` (runs.iteration: in train mode with the backward,
    as parity's interpreter times a train run), each timed (the device synchronized)."""
    sync = _sync(device)
    step = iteration(compiled, inputs, train, tangents, fresh_grads)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def _run_compiled(compiled, gm, g, device: str, train: bool, iters: int, req) -> Dict[str, Any]:
    """One call of `compiled` on g's inputs and its results (timed: the compile's time), then
    iters - 1 timed iterations; the results written to req["out"]."""
    inputs = device_inputs(g, device, train)
    sync = _sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with contextlib.nullcontext() if train else torch.no_grad():
        # The seed parity's reference runs use (experiment/reference.h): random ops (dropout)
        # draw the same numbers, which Inductor's fallback_random takes from eager's kernels.
        torch.manual_seed(int(req.get("seed", SEED)))
        t0 = time.perf_counter()
        out = compiled(*inputs)
        # A train run's results take its backward, whose graph AOTAutograd compiles at that first
        # call: the compile's time includes it, as the dynamo runner's compile latency of a
        # training iteration does.
        tensors = _results(gm, g, out, inputs, train, req)
        sync()
        compile_time = time.perf_counter() - t0
    times = _timed_calls(compiled, inputs, device, train, iters - 1 if iters > 1 else 0, device_tangents(g, device, train),
                         [*gm.parameters(), *inputs])
    write_tensors(req["out"], tensors)
    peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else 0
    return {"names": list(tensors), "compile_time_s": compile_time, "run_times_s": times, "peak_memory_bytes": peak}


def time_runs(req) -> Dict[str, Any]:
    """The timed runs of what the last `run` with "keep" compiled (req["iterations"] of them):
    parity asks for them once its own reference runs are done, so that neither times the other."""
    if not _KEPT:
        raise RuntimeError("time_runs: no compiled graph kept (a run request with \"keep\" comes first)")
    k = _KEPT
    ctx = _inductor_config(k["options"]) if k["options"] is not None else contextlib.nullcontext()
    try:
        with ctx:
            times = _timed_calls(k["compiled"], k["inputs"], k["device"], k["train"], max(0, int(req.get("iterations", 1))),
                                 k["tangents"], k["fresh_grads"])
    finally:
        _KEPT.clear()  # what it holds (the compiled graph's parameters, on a GPU too) goes now
    return {"run_times_s": times}


def _results(gm, g, out, inputs, train: bool, req) -> Dict[str, torch.Tensor]:
    """What a run reports (contract.py): the outputs, or in train mode the train results."""
    if train:
        return train_results(gm, g, out, inputs, float(req.get("sgd_lr", SGD_LR)))
    return {f"output/{k}": v for k, v in enumerate(out)}


def results_once(req, backend: Optional[str], dtype: Optional[torch.dtype] = None) -> Dict[str, torch.Tensor]:
    """One run of the request's graph, freshly loaded: compiled by the dynamo backend `backend`
    (its options applied), or eager when None; in `dtype` when given (floating inputs, and the
    graph by parity's rule: standalone.in_run_dtype). The results as a backend run reports them,
    on the CPU."""
    return compiled_once(req, backend, dtype)()


def compiled_once(req, backend: Optional[str], dtype: Optional[torch.dtype] = None) -> Callable[[], Dict[str, torch.Tensor]]:
    """results_once in two steps: the graph loaded and compiled now (a static graph's compile is
    the backend's own, run here; a symbolic one's is torch.compile's at a call whose compiled
    code runs nothing: compiled_by_a_call_that_runs_nothing), and its one run as the function
    returned. A compile that raises raises here, before the graph ran anything (a rank's
    collectives: rank_replay)."""
    _, g = load_graph(req)
    device, train = req.get("device", "cpu"), req.get("mode") == "train"
    gm = g.module_on(device)
    if dtype is not None:  # parity's rule for a run in dtype, dtype arguments included
        gm = in_run_dtype(gm, dtype)
    inputs = device_inputs(g, device, train)
    if dtype is not None:
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        inputs = [x.detach().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() and train
                  and g.differentiates(name) else x for x, name in zip(inputs, g.input_names)]
    def settings():
        return _inductor_config(req.get("options", {})) if backend == "inductor" else contextlib.nullcontext()

    def grad_mode():
        return contextlib.nullcontext() if train else torch.no_grad()

    fn = gm
    if backend is not None:
        options = req.get("options", {})
        kwargs = {} if backend == "inductor" else {k: parse_option(v) for k, v in options.items()}
        with settings(), grad_mode(), default_dtype(dtype):
            if g.symbolic():
                fn = compiled_by_a_call_that_runs_nothing(gm, backend, kwargs, inputs)
            else:
                fn = Handoff(gm, backend, kwargs)
                fn.compile(inputs)

    def run() -> Dict[str, torch.Tensor]:
        with settings(), grad_mode(), default_dtype(dtype):
            torch.manual_seed(int(req.get("seed", SEED)))
            out = fn(*inputs)
            results = _results(gm, g, out, inputs, train, req)
        return {k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for k, v in results.items()}
    return run


class _CompiledNotRun(Exception):
    """Raised by the backend at the call that compiled a graph (compiled_by_a_call_that_runs_nothing)."""


def compiled_by_a_call_that_runs_nothing(gm: torch.fx.GraphModule, backend: str, kwargs: Dict[str, Any],
                                         inputs) -> Callable:
    """A symbolic graph's torch.compile(dynamic=True), compiled now: dynamo traces it at a first
    call with `inputs` (fake values: nothing runs) and hands it to `backend` (Inductor with the
    config in force, another backend with `kwargs`), which compiles it, keeps what it compiled and
    ends that call before anything runs (a rank's collectives: rank_replay). A compile that raises
    raises here. The next call traces it again and gets what was kept, the same graph's compile
    (dynamo's own cache is not filled by a call that raised: compiled code that raises makes
    dynamo trace the frame's exception path, "Attempt to trace generator", measured on torch 2.13)."""
    kept: Dict[str, Any] = {}

    def compile_once(traced, example):
        if kept.get("code") == traced.code:
            return kept["compiled"]
        compiled = backend_compile(backend, kwargs, traced, example)
        if "code" in kept:
            return compiled
        kept.update(code=traced.code, compiled=compiled)
        raise _CompiledNotRun()

    fn = torch.compile(gm, backend=compile_once, fullgraph=True, dynamic=True)
    try:
        fn(*inputs)
    except Exception as e:  # noqa: BLE001 (dynamo wraps what its backend raised)
        if not _caused_by(e, _CompiledNotRun):
            raise
    return fn


def _caused_by(e: BaseException, kind: type) -> bool:
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, kind) or isinstance(getattr(e, "inner_exception", None), kind):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def aot_graphs(req) -> Dict[str, Any]:
    """The graph AOTAutograd hands its compiler (functionalized; with Inductor's decompositions
    and the min-cut partitioner for aot_eager_decomp_partition), as a repro dir."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._functorch.aot_autograd import aot_module_simplified

    from ..serialize import graph_to_json, write_repro_dir

    repro, g = load_graph(req)
    captured = {}

    def fw_compiler(gm, example_inputs):
        captured["fw"] = gm
        return gm

    kwargs = {}
    if req["backend"] == "aot_eager_decomp_partition":
        from torch._inductor.decomposition import select_decomp_table
        kwargs = {"decompositions": select_decomp_table(), "partition_fn": min_cut_rematerialization_partition}
    device = req.get("device", "cpu")
    g.module = g.module_on(device)
    inputs = [x.to(device) for x in g.inputs()]
    # AOTAutograd sees parameters and buffers as inputs, as under torch.compile (subgraphs, the
    # graph modules higher-order ops take, stay attributes).
    tensor_attrs = [n for n in g.module.graph.nodes if n.op == "get_attr" and "parity_target" in n.meta]
    params = [getattr(g.module, n.target) for n in tensor_attrs]
    flat_mod = _lift_attrs(g.module)
    args = params + list(inputs)
    with torch.no_grad(), static_tracing(args) as example:
        aot_module_simplified(flat_mod, example, fw_compiler=fw_compiler, **kwargs)
    fw = captured["fw"]
    keys = [n.meta["parity_target"] for n in tensor_attrs]
    phs = [n for n in fw.graph.nodes if n.op == "placeholder"]
    attr_map = {p.name: k for p, k in zip(phs[: len(keys)], keys)}
    inputs_map = {p.name: g.entry["inputs"][orig] for p, orig in zip(phs[len(keys):], g.input_names)}
    gjson = graph_to_json(fw, g.name, attr_map)
    entry = dict(g.entry)
    entry["inputs"] = inputs_map
    needed = set(keys) | set(inputs_map.values()) | set(entry.get("expected_outputs", []))
    tensors = {k: repro.tensors[k] for k in needed}
    manifest = dict(repro.manifest)
    manifest.pop("graphs", None)
    manifest["producer"] = f"parity worker ({req['backend']})"
    write_repro_dir(req["out"], manifest, [(gjson, entry)], tensors)
    return {"out": req["out"]}


def _lift_attrs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of gm whose tensor get_attr nodes are placeholders (first, in graph order); the
    graph modules of its higher-order ops stay attributes."""
    import copy
    g2 = copy.deepcopy(gm.graph)
    attrs = [n for n in g2.nodes if n.op == "get_attr" and "parity_target" in n.meta]
    # before the first node that stays (a graph reading only attributes has no placeholder, and
    # a node erased below is no place to insert before)
    lifted = set(attrs)
    first = next(n for n in g2.nodes if n not in lifted)
    root = torch.nn.Module()
    for n in g2.nodes:
        if n.op == "get_attr" and "parity_target" not in n.meta:
            setattr(root, n.target, getattr(gm, n.target))
    with g2.inserting_before(first):
        for n in attrs:
            p = g2.placeholder("attr_" + n.target)
            p.meta.update(n.meta)
            n.replace_all_uses_with(p)
            g2.erase_node(n)
    return torch.fx.GraphModule(root, g2)
