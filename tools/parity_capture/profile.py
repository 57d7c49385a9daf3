"""`parity profile`'s Python side: where a compiled graph spends its time, next to eager.

    python -m parity_capture.profile REQUEST.json RESULT.json

One process per profile, started by parity with a deadline, so a backend that crashes or hangs
ends this process and not parity. It reports facts; parity (profile/) turns them into shares,
categories, tables and records.

Request: repro, graph (default: the first), backend (a dynamo backend name), options (its
options), device, mode (eval | train), warmup, iterations, profile_iterations, trace (a path or
null), kernel (a compiled kernel's name or null), kernel_options (backend options for a second
compile of that kernel, e.g. {"max_autotune": "True"}), imports (modules registering host ops).

Result:
  eager / backend: {times_ms: [...], peak_mem_bytes}; backend also compile_s
  profile: {iterations, wall_ms (one profiled iteration), rows (time_us: self device time on
            CUDA, self CPU time on the CPU, per iteration): [{name, phase, time_us, calls,
            category, kernel, post_grad_nodes, nodes, device_kernels}], device_busy_us}; phase is
            forward, or backward for what the autograd engine ran in a train step
  eager_profile: {iterations, wall_ms, rows: [{name, time_us, calls}]}
  kernels: {phase: {name: category}} for every kernel the backend generated
  provenance: true when Inductor's provenance tracking answered (kernel -> graph nodes)
  trace: the merged chrome trace written, or null
  kernel_bench: {name, phase, category, nodes, runs: [{options, times_ms, bytes}]} for --kernel
            (NAME, forward:NAME or backward:NAME)
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from .standalone import parse_option

# Inductor names a CPU kernel's profiler record "graph_<id>_<kernel>".
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
# Inductor's extern kernels (ATen calls it makes instead of generating code) that do matmul,
# convolution or attention work (also any op named *conv* or _scaled_dot_product*); any other
# ATen op seen in a compiled run is "other".
_MATMUL_CONV = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "matmul", "linear", "_int_mm", "_linear_pointwise",
                "mkl_linear", "_weight_int8pack_mm", "_flash_attention_forward", "_efficient_attention_forward"}
# Runtime API events the profiler may hang device kernels on; the op above them launched them.
_RUNTIME_API = ("cudaLaunch", "cuLaunch", "hipLaunch", "hipExtModuleLaunch", "cudaMemcpy", "cudaMemset")


def kernel_category(source: str) -> str:
    """The category of a generated kernel from its source, as Inductor decided it when it wrote
    the kernel: Triton kernels carry their heuristics decorator (pointwise, reduction,
    persistent_reduction, template, foreach); C++ kernels are reductions when they keep an
    accumulator, templates when they are GEMM templates, else pointwise."""
    m = re.search(r"@triton_heuristics\.(\w+)\(", source)
    if m:
        kind = m.group(1)
        return {"pointwise": "pointwise", "reduction": "reduction", "persistent_reduction": "persistent_reduction",
                "template": "template", "foreach": "pointwise", "split_scan": "reduction",
                "cooperative_reduction": "reduction", "user_autotune": "template"}.get(kind, "other")
    if "@triton.jit" in source:
        return "template"
    if "CppMicroGemm" in source or "cpp_template" in source or "GemmTemplate" in source:
        return "template"
    if "tmp_acc" in source:
        return "reduction"
    return "pointwise"


def code_phase(code: str) -> str:
    """"backward" for the module of an AOTAutograd backward graph (its header names the AOT
    graph: `# AOT ID: ['0_backward']`), else "forward"."""
    m = re.search(r"^# AOT ID: \[([^\]]*)\]", code[:2000], re.M)
    return "backward" if m and "_backward" in m.group(1) else "forward"


def generated_kernels(codes: List[str]) -> Dict[str, Dict[str, str]]:
    """phase -> name -> category of every kernel defined in the compiled modules' source."""
    phases: Dict[str, Dict[str, str]] = {"forward": {}, "backward": {}}
    for code in codes:
        out = phases[code_phase(code)]
        # `<name> = async_compile.<kind>('<name>', ...source...)` up to the next definition.
        starts = [(m.start(), m.group(1)) for m in re.finditer(r"^(\w+) = async_compile\.\w+\(", code, re.M)]
        for i, (pos, name) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(code)
            out[name] = kernel_category(code[pos:end])
    return phases


def op_short_name(name: str) -> str:
    """'aten::addmm', 'extern_kernels.addmm', 'aten.addmm.default', 'torch.ops.aten.addmm.default'
    -> 'addmm'."""
    parts = name.split("::")[-1].split(".")
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        return parts[3]
    if parts[0] in ("extern_kernels", "aten") and len(parts) > 1:
        return parts[1]
    return parts[0]


class Provenance:
    """Inductor's provenance tracking (config.trace.provenance_tracking_level): which post-grad
    nodes each kernel came from and which of the input graph's nodes each post-grad node came
    from, per phase ("forward": an inference or forward graph, "backward": AOTAutograd's
    backward graph), collected from every graph compiled while it is active.

    Inductor maps a forward graph's post-grad nodes to the input graph's nodes itself. A backward
    graph has no such map (its nodes come from autograd, not from the input graph), and torch
    2.13 does not report a lazily compiled backward's kernels at all; here a backward graph's
    node goes to the forward nodes of the same autograd op (the sequence number autograd gives
    both, `seq_nr`) and from there to the input graph's nodes, and a forward node the partitioner
    recomputes in the backward keeps its forward mapping."""

    def __init__(self):
        self.kernel_to_post: Dict[str, Dict[str, List[str]]] = {"forward": {}, "backward": {}}
        self.post_to_pre: Dict[str, List[str]] = {}  # forward post-grad node -> input graph's nodes
        self.seq_to_post: Dict[int, List[str]] = {}  # forward: autograd seq_nr -> post-grad nodes
        self.backward_nodes: Dict[str, Dict[str, Any]] = {}  # backward post-grad node -> seq_nr, recomputed
        self.answered = False
        self._phase = "forward"  # of the graph being compiled
        self._seen: set = set()  # kernel keys already reported ("name:handle", unique per process)
        self._index: Dict[str, tuple] = {}  # phase -> (mapping size it was built at, op -> extern keys)

    def _graph(self, graph) -> None:
        """A post-grad graph about to be lowered: its phase and its nodes' autograd sequence numbers."""
        nodes = [n for n in graph.nodes if n.op == "call_function"]
        backward = _compiling_backward()
        self._phase = "backward" if backward else "forward"
        for n in nodes:
            seq = n.meta.get("seq_nr")
            if backward:
                self.backward_nodes[n.name] = {"seq": seq, "recomputed": n.meta.get("partitioner_tag") != "is_backward"}
            elif seq is not None:
                self.seq_to_post.setdefault(seq, []).append(n.name)

    def _report(self, info: Dict[str, Any]) -> None:
        self.answered = True
        for k, nodes in (info.get("cppCodeToPost") or {}).items():
            if k in self._seen:  # a backward's report repeats the kernels of earlier backwards
                continue
            self._seen.add(k)
            self.kernel_to_post[self._phase].setdefault(k.rsplit(":", 1)[0], []).extend(nodes)
        if self._phase == "forward":
            for post, pres in (info.get("postToPre") or {}).items():
                self.post_to_pre.setdefault(post, []).extend(pres)

    @contextlib.contextmanager
    def collecting(self):
        try:
            import torch._inductor.debug as dbg
            import torch.fx.traceback as fx_traceback
            original, original_graph = dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json
        except (ImportError, AttributeError):  # a torch without provenance tracking
            yield
            return

        def graph_provenance(graph, *args, **kwargs):
            with contextlib.suppress(Exception):  # never in the compile's way
                self._graph(graph)
            return original_graph(graph, *args, **kwargs)

        def dump(*args, **kwargs):
            # A backward compiled lazily runs outside AOTAutograd's provenance context, where
            # Inductor reports nothing; its kernels are recorded all the same.
            lazy = getattr(dbg, "_pre_grad_graph_id", 0) is None
            if lazy:
                dbg._pre_grad_graph_id = -1
            try:
                info = original(*args, **kwargs)
            finally:
                if lazy:
                    dbg._pre_grad_graph_id = None
            with contextlib.suppress(Exception):
                self._report(info)
            return info

        dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json = dump, graph_provenance
        try:
            yield
        finally:
            dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json = original, original_graph

    def _externs(self, phase: str) -> Dict[str, List[str]]:
        """Extern and fallback calls' keys by op ("addmm" -> ["extern_kernels.addmm", ...]),
        built once per state of the mapping: lookups run for every profiler event."""
        cache = self._index
        size = len(self.kernel_to_post[phase])
        if cache.get(phase, (None,))[0] != size:
            index: Dict[str, List[str]] = {}
            for k in self.kernel_to_post[phase]:
                if not k.startswith(("cpp_", "triton_")):
                    index.setdefault(op_short_name(k), []).append(k)
            cache[phase] = (size, index)
        return cache[phase][1]

    def lookup(self, row_name: str, phase: str = "forward") -> Optional[str]:
        """The provenance key of a profiler row: a generated kernel by name, an extern call by op."""
        key = _GRAPH_PREFIX.sub("", row_name)
        if key in self.kernel_to_post[phase]:
            return key
        keys = self._externs(phase).get(op_short_name(row_name))
        return keys[0] if keys else None

    def _pre(self, post: str, phase: str) -> List[str]:
        if phase == "forward":
            return self.post_to_pre.get(post, [])
        node = self.backward_nodes.get(post, {})
        forward = self.seq_to_post.get(node.get("seq"), []) if node.get("seq") is not None else []
        if not forward and node.get("recomputed"):
            forward = [post]  # the partitioner keeps a recomputed forward node's name
        return [pre for f in forward for pre in self.post_to_pre.get(f, [])]

    def nodes(self, key: str, phase: str = "forward") -> Dict[str, List[str]]:
        """The post-grad nodes a kernel computes (for an extern call: every call of that op) and
        the input graph's nodes they come from, in order, without repeats."""
        table = self.kernel_to_post[phase]
        keys = [key] if key.startswith(("cpp_", "triton_")) else self._externs(phase).get(op_short_name(key), [key])
        post = list(dict.fromkeys(n for k in keys for n in table.get(k, [])))
        pre = list(dict.fromkeys(n for p in post for n in self._pre(p, phase)))
        return {"post_grad_nodes": post, "nodes": pre}


def _compiling_backward() -> bool:
    """Whether the graph being compiled is AOTAutograd's backward, as the generated module's
    `# AOT ID: ['0_backward']` header says (the tracing context names the graph). Not the
    partitioner's tags: a forward graph holds is_backward nodes too (resnet's batch norms)."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        names = (ctx.aot_graph_name if ctx is not None else None) or []
    except AttributeError:
        return False
    return any(str(n).endswith("_backward") for n in names)


def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def _timed(step: Callable[[], Any], sync: Callable[[], None], n: int) -> List[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _peak_memory(step: Callable[[], Any], device: str, sync: Callable[[], None]) -> int:
    """Peak bytes allocated during one step: the caching allocator's high-water mark on CUDA (as
    the dynamo runner reads it), the profiler's allocation events on the CPU."""
    if device.startswith("cuda"):
        sync()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        sync()
        return int(torch.cuda.max_memory_allocated() - base)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # Every allocation and free, in time order (FunctionEvents fold them into the ops).
    mem = sorted(((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"))
    live = peak = 0
    for _, nbytes in mem:
        live += nbytes
        peak = max(peak, live)
    return int(peak)


def _activities(device: str):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


def _profile(step, device, sync, iterations, trace_path=None):
    """`iterations` profiled steps after one profiler warm-up step (its start-up cost is not the
    model's). Returns (events, wall_ms): wall_ms is one profiled step's wall time, the profiler's
    recording overhead included, its result processing not."""
    done = []

    def ready(p):
        if trace_path:
            p.export_chrome_trace(trace_path)
        done.append(p.events())

    schedule = torch.profiler.schedule(wait=0, warmup=1, active=iterations, repeat=1)
    wall = 0.0
    with torch.profiler.profile(activities=_activities(device), schedule=schedule, on_trace_ready=ready) as prof:
        for i in range(iterations + 1):
            t0 = time.perf_counter()
            step()
            sync()
            if i > 0:
                wall += time.perf_counter() - t0
            prof.step()
    return done[0], wall * 1e3 / iterations


def event_phase(e) -> str:
    """"backward" for an event the autograd engine ran (under an
    `autograd::engine::evaluate_function: ...` record), else "forward"."""
    x = e
    while x is not None:
        if x.name.startswith("autograd::engine::evaluate_function"):
            return "backward"
        x = x.cpu_parent
    return "forward"


def _launcher(e):
    """The op an event's device kernels belong to (past runtime API events)."""
    while e.name.startswith(_RUNTIME_API) and e.cpu_parent is not None:
        e = e.cpu_parent
    return e


def _owner(e, known, phase):
    """The row an event's time belongs to: its outermost ancestor (or itself) that is a kernel of
    the compiled module (`known`: the call the module makes, e.g. aten::convolution, not the
    aten::cudnn_convolution inside it), so the ATen ops and runtime calls inside an extern
    kernel count for it; else the event itself, past runtime API events."""
    found, x = None, e
    while known is not None and x is not None:
        if known(x.name, phase):
            found = x
        x = x.cpu_parent
    return found if found is not None else _launcher(e)


def profile_rows(events, device: str, iterations: int,
                 known: Optional[Callable[[str, str], bool]] = None) -> Dict[str, Any]:
    """Rows of a profile: time per iteration (device time of the kernels launched under the row's
    op on CUDA, self CPU time on the CPU), calls per iteration (kernel launches on CUDA), the
    device kernels, the phase (forward or backward: a train step's two compiled modules may name
    kernels alike, so rows are per phase). Self times partition the total, so the rows sum to
    the profiled time; on CUDA that total is the device's busy time (kernels, as Inductor's
    report counts it)."""
    from torch.autograd import DeviceType
    cuda = device.startswith("cuda")
    rows: Dict[tuple, Dict[str, Any]] = {}

    def row_of(name, phase):
        return rows.setdefault((phase, name), {"name": name, "phase": phase, "time_us": 0.0, "calls": 0, "device_kernels": []})

    for e in events:
        if e.device_type != DeviceType.CPU or e.name == "[memory]":
            continue
        if cuda and not e.kernels:
            continue
        phase = event_phase(e)
        owner = _owner(e, known, phase)
        if cuda:
            row = row_of(owner.name, phase)
            row["time_us"] += sum(k.duration for k in e.kernels)
            row["calls"] += len(e.kernels)
            for k in e.kernels:
                if k.name not in row["device_kernels"]:
                    row["device_kernels"].append(k.name)
        else:
            us = e.self_cpu_time_total
            if us > 0 or owner is e:
                row = row_of(owner.name, phase)
                row["time_us"] += us
                row["calls"] += 1 if owner is e else 0
    rows = {k: r for k, r in rows.items() if r["time_us"] > 0}
    for row in rows.values():
        row["time_us"] /= iterations
        row["calls"] = row["calls"] / iterations
    out = sorted(rows.values(), key=lambda r: -r["time_us"])
    return {"rows": out, "device_busy_us": sum(r["time_us"] for r in out) if cuda else None}


def classify(rows, kernels: Dict[str, Dict[str, str]], provenance: Provenance) -> None:
    """Adds category, kernel (the generated kernel or ATen call it is) and nodes to each row, from
    the kernels and provenance of the row's phase. An ATen op the compiled module calls (an
    extern kernel or a fallback) is a kernel when provenance names it: "extern" for matmul,
    convolution and attention, else "other"."""
    for row in rows:
        phase = row.get("phase", "forward")
        key = _GRAPH_PREFIX.sub("", row["name"])
        pkey = provenance.lookup(row["name"], phase)
        if key in kernels[phase]:
            row["category"], row["kernel"] = kernels[phase][key], key
        elif pkey or is_matmul_conv(row["name"]):
            row["category"] = "extern" if is_matmul_conv(row["name"]) else "other"
            row["kernel"] = row["name"]
        else:
            row["category"], row["kernel"] = "other", None
        row.update(provenance.nodes(pkey, phase) if pkey else {"post_grad_nodes": [], "nodes": []})


def is_matmul_conv(name: str) -> bool:
    op = op_short_name(name)
    return name.startswith(("aten::", "mkldnn::", "mkl::", "onednn::")) and (
        op in _MATMUL_CONV or op.startswith("_scaled_dot_product") or "conv" in op)


def merge_traces(parts: List[tuple], out_path: str) -> None:
    """One chrome/Perfetto trace of several profiles: each part's processes renamed
    '<label>: <name>' and their pids moved apart so the parts do not interleave."""
    events = []
    for i, (label, path) in enumerate(parts):
        with open(path) as f:
            data = json.load(f)
        offset = i * 10_000_000
        named = set()
        for ev in data.get("traceEvents", []):
            if isinstance(ev.get("pid"), int):
                ev["pid"] += offset
            if ev.get("ph") == "M" and ev.get("name") == "process_name":
                ev.setdefault("args", {})["name"] = f"{label}: {ev.get('args', {}).get('name', '')}".rstrip(": ")
                named.add(ev.get("pid"))
            events.append(ev)
        for pid in {ev.get("pid") for ev in data.get("traceEvents", []) if isinstance(ev.get("pid"), int)} - named:
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, out_path)


class KernelRecorder:
    """Records the arguments of the first call of one generated kernel (a module global of the
    compiled module: a C++ kernel function, or a Triton kernel whose `.run` is called), so it
    can be run alone."""

    def __init__(self, name: str, phase: str = "forward"):
        self.name, self.phase, self.call = name, phase, None
        self._undo: List[Callable[[], None]] = []

    @staticmethod
    def _phase_of(mod) -> str:
        try:
            with open(mod.__file__) as f:
                return code_phase(f.read(2000))
        except (OSError, TypeError, AttributeError):
            return "forward"

    def install(self) -> bool:
        import types
        # Inductor loads each compiled module into sys.modules (torch._inductor.runtime.compile_tasks.<key>).
        mods = {id(m): m for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)}
        for mod in mods.values():
            fn = vars(mod).get(self.name)
            if fn is None or not (callable(fn) or hasattr(fn, "run")) or self._phase_of(mod) != self.phase:
                continue
            if hasattr(fn, "run"):  # a Triton kernel (CachingAutotuner)
                original = fn.run

                def run(*args, _orig=original, **kwargs):
                    if self.call is None:
                        self.call = (lambda: _orig(*args, **kwargs), args)
                    return _orig(*args, **kwargs)
                fn.run = run
                self._undo.append(lambda fn=fn, o=original: setattr(fn, "run", o))
            else:
                def call(*args, _orig=fn):
                    if self.call is None:
                        self.call = (lambda: _orig(*args), args)
                    return _orig(*args)
                setattr(mod, self.name, call)
                self._undo.append(lambda mod=mod, o=fn: setattr(mod, self.name, o))
        return bool(self._undo)

    def uninstall(self):
        for undo in self._undo:
            undo()
        self._undo = []

    def bench(self, sync, reps: int, cuda: bool) -> Dict[str, Any]:
        """Times of the kernel alone: on CUDA each call between two CUDA events, behind a 256 MB
        memset that flushes the L2 cache and keeps the GPU busy while the call is enqueued (so
        the events time the kernel, not its launch), as Inductor's benchmarker does; on the CPU
        batches of calls long enough for the clock."""
        run, args = self.call
        nbytes = sum(a.untyped_storage().nbytes() for a in args if isinstance(a, torch.Tensor))
        for _ in range(3):
            run()
        sync()
        times = []
        if cuda:
            flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for start, end in pairs:
                flush.zero_()
                start.record()
                run()
                end.record()
            sync()
            times = [start.elapsed_time(end) for start, end in pairs]
        else:
            t0 = time.perf_counter()
            run()
            one = max(time.perf_counter() - t0, 1e-7)
            inner = max(1, min(1000, int(1e-3 / one)))
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(inner):
                    run()
                times.append((time.perf_counter() - t0) * 1e3 / inner)
        return {"times_ms": times, "bytes": nbytes}


def _inductor_patch(options: Dict[str, Any], extra: Dict[str, Any]):
    import torch._inductor.config as cfg
    patch = {k: parse_option(v) for k, v in options.items()}
    patch.update(extra)
    return cfg.patch(patch)


def _compile(gm, backend: str, options: Dict[str, Any], profiling: bool):
    """torch.compile as `parity verify` runs the backend. For Inductor, profiling settings: the
    caches off (so code is generated, and provenance recorded, in this process), descriptive
    kernel names, a profiler record around each C++ kernel, provenance tracking on."""
    if backend == "inductor":
        extra = {"force_disable_caches": True, "triton.unique_kernel_names": True} if profiling else {}
        if profiling:
            extra["cpp.enable_kernel_profile"] = True
            extra["trace.provenance_tracking_level"] = 1
        compiled = torch.compile(gm, backend="inductor", fullgraph=True)
        return compiled, lambda: _inductor_patch(options, extra)
    kw = {"options": {k: parse_option(v) for k, v in options.items()}} if options else {}
    return torch.compile(gm, backend=backend, fullgraph=True, **kw), contextlib.nullcontext


def _step(fn, inputs, train: bool, tangents=()):
    """One iteration: the forward, and in train mode its backward: of the gradients the program
    fed to the outputs (a dump of a real training step, `tangents`), else of the loss."""
    if not train:
        def step():
            with torch.no_grad():
                return fn(*inputs)
        return step

    def step():
        out = fn(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        pairs = [(o, t) for o, t in zip(outs, tangents) if t is not None and o.requires_grad]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [t for _, t in pairs])
        else:
            loss = outs[0]
            (loss if loss.numel() == 1 else loss.sum()).backward()
        return out
    return step


def _stats(times: List[float]) -> Dict[str, Any]:
    return {"times_ms": times, "median_ms": statistics.median(times) if times else None}


def run_profile(req: Dict[str, Any]) -> Dict[str, Any]:
    from torch._inductor.utils import run_and_get_code

    import importlib

    from .worker import device_inputs, load_graph
    for m in req.get("imports", []):
        importlib.import_module(m)
    device = req.get("device", "cpu")
    train = req.get("mode") == "train"
    backend, options = req["backend"], req.get("options", {})
    warmup, iters = int(req.get("warmup", 3)), int(req.get("iterations", 20))
    prof_iters = int(req.get("profile_iterations", 5))
    _, g = load_graph(req)
    gm = g.module.to(device)
    inputs = device_inputs(g, device, train)
    tangents = [None if t is None else t.to(device) for t in g.tangents()] if train else []
    sync = _sync(device)
    result: Dict[str, Any] = {"device": device, "backend": backend, "graph": g.name, "torch_version": torch.__version__,
                              "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"}
    trace_parts = []
    tmp_dir = req.get("scratch") or os.path.dirname(os.path.abspath(req.get("trace") or "."))

    # Eager: the captured ATen graph run op by op.
    eager = _step(gm, inputs, train, tangents)
    _timed(eager, sync, warmup)
    result["eager"] = _stats(_timed(eager, sync, iters))
    result["eager"]["peak_mem_bytes"] = _peak_memory(eager, device, sync)
    eager_trace = os.path.join(tmp_dir, "eager.trace.json") if req.get("trace") else None
    prof, wall = _profile(eager, device, sync, prof_iters, eager_trace)
    result["eager_profile"] = dict(profile_rows(prof, device, prof_iters), iterations=prof_iters, wall_ms=wall)
    if eager_trace:
        trace_parts.append(("eager", eager_trace))

    # The backend: compiled once (timed), then warm iterations.
    torch._dynamo.reset()
    provenance = Provenance()
    compiled, config = _compile(gm, backend, options, profiling=True)
    step = _step(compiled, inputs, train, tangents)
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
            result["kernel_bench"] = bench_kernel(req, gm, inputs, train, sync, step, kernels, provenance)
    if req.get("trace"):
        merge_traces(trace_parts, req["trace"])
        for _, p in trace_parts:
            os.unlink(p)
        result["trace"] = req["trace"]
    return result


def same_work(nodes: List[str], provenance: "Provenance", kernels: Dict[str, str], phase: str) -> Optional[str]:
    """The generated kernel of another compile that computes the most of `nodes` (the input
    graph's nodes one kernel computed): kernel names follow the fusion decisions, so a changed
    option can rename or refuse the kernel while the nodes stay."""
    want, best, best_score = set(nodes), None, 0.0
    for k in kernels:
        have = set(provenance.nodes(k, phase)["nodes"])
        score = len(want & have) / len(want | have) if want | have else 0.0
        if score > best_score:
            best, best_score = k, score
    return best


def kernel_request(spec: str, kernels: Dict[str, Dict[str, str]]) -> tuple:
    """(phase, name) of --kernel's NAME, "forward:NAME" or "backward:NAME" (a train step's two
    compiled modules may name kernels alike; a bare name is the forward's when both have it)."""
    phase, _, name = spec.rpartition(":") if spec.startswith(("forward:", "backward:")) else ("", "", spec)
    name = _GRAPH_PREFIX.sub("", name)
    for p in ([phase] if phase else ["forward", "backward"]):
        if name in kernels[p]:
            return p, name
    known = ", ".join(sorted(f"{k}" if p == "forward" else f"backward:{k}" for p in kernels for k in kernels[p])) or "none"
    raise LookupError(f"--kernel {spec}: no generated kernel of that name (kernels: {known})")


def bench_kernel(req, gm, inputs, train, sync, step, kernels, provenance) -> Dict[str, Any]:
    """Runs one generated kernel alone on the arguments it got in the model, with the backend's
    options and, if given, once more compiled with `kernel_options` changed (there, the kernel
    computing the same graph nodes, whatever its name)."""
    from torch._inductor.utils import run_and_get_code
    phase, name = kernel_request(req["kernel"], kernels)
    reps = int(req.get("kernel_reps", 30))
    runs = []

    def measure(run_step, kernel, category, label):
        rec = KernelRecorder(kernel, phase)
        if not rec.install():
            raise LookupError(f"--kernel {kernel}: the compiled module holding it was not found")
        try:
            run_step()
            sync()
        finally:
            rec.uninstall()
        if rec.call is None:
            raise LookupError(f"--kernel {kernel}: not called in an iteration")
        out = rec.bench(sync, reps, req.get("device", "cpu").startswith("cuda"))
        out.update(options=label, kernel=kernel, category=category)
        runs.append(out)

    measure(step, name, kernels[phase][name], dict(req.get("options", {})))
    nodes = provenance.nodes(name, phase)["nodes"]
    if req.get("kernel_options"):
        torch._dynamo.reset()
        options = dict(req.get("options", {}), **req["kernel_options"])
        compiled, config = _compile(gm, req["backend"], options, profiling=True)
        step2 = _step(compiled, inputs, train, tangents)
        again = Provenance()
        with config(), again.collecting():
            _, codes = run_and_get_code(step2)
            of_run = generated_kernels(codes)[phase]
            target = name if name in of_run else same_work(nodes, again, of_run, phase)
            if target is None:
                raise LookupError(f"--kernel {name}: compiled with {req['kernel_options']}, no kernel computes its nodes "
                                  f"(kernels: {', '.join(sorted(of_run))})")
            measure(step2, target, of_run[target], options)
    return {"name": name, "phase": phase, "category": kernels[phase][name], "nodes": nodes, "runs": runs}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m parity_capture.profile REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    import warnings
    warnings.filterwarnings("ignore")
    with open(argv[0]) as f:
        req = json.load(f)
    try:
        result = {"ok": True, **run_profile(req)}
    except Exception as e:  # reported to parity with its type; the exit status stays 0
        import traceback
        result = {"ok": False, "error_type": type(e).__name__, "error": str(e).strip()[:4000],
                  "traceback": traceback.format_exc()[-8000:]}
    tmp = argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
