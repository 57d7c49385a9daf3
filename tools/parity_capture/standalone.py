"""The eager / fp64 / backend check a standalone repro.py runs, over the graph reader of
standalone_graph.py: a backend's compile, the graph's inputs on the run's device and dtype, a
train step's results, and main(), which judges as torch._dynamo.utils.same does (same.py).

Needs only torch and safetensors: `parity minify` inlines same.py, standalone_graph.py and this
file into minified/repro.py (repro_script.py); the package runs the same code, so the script and
parity judge results alike. Lines marked `package-only` are left out of the script."""
import copy
import json
import os
import shlex

import torch
import torch.fx as fx

from parity_capture.same import same_tensor  # package-only
from parity_capture.standalone_graph import SEED, SGD_LR, as_output, differentiable, graph_from_json, load_tensors, placeholder_values  # package-only


def parse_option(v):
    """A --backend-option value (always a string on parity's side) as the Python value it names."""
    if not isinstance(v, str):
        return v
    if v in ("True", "true", "False", "false"):
        return v in ("True", "true")
    if v in ("None", "none"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def inductor_settings(options):
    """Inductor config keys for an accuracy run (every one: the worker's, the profiling child's,
    this script's): the options as given (strings as parity passes them), and random ops falling
    back to eager's kernels, as in PyTorch's accuracy runs, unless they say otherwise."""
    patch = {k: parse_option(v) for k, v in (options or {}).items()}
    patch.setdefault("fallback_random", True)
    return patch


class static_tracing:  # noqa: N801 (a context manager)
    """What dynamo compiles a backend's graph in: a tracing context whose fake mode has a
    ShapeEnv, and `inputs` as fake tensors of that mode with their static shapes (what `with`
    gives)."""

    def __init__(self, inputs):
        from torch._guards import TracingContext, tracing
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        self.mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True)
        self.ctx = tracing(TracingContext(self.mode))
        self.inputs = inputs

    def __enter__(self):
        self.ctx.__enter__()
        return [self.mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x for x in self.inputs]

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc)


class Handoff:
    """A recorded graph handed to a dynamo backend as dynamo hands it the graph it traced,
    `backend(gm, example_inputs)`, compiled at the first call with that call's inputs (in its
    grad mode): the backend compiles the recorded ATen graph itself, with no second dynamo trace
    of it (which torch 2.11 refuses for some train graphs: "Attempt to trace generator"). The
    compile runs in a tracing context whose fake mode has a ShapeEnv (higher-order ops such as
    while_loop make data-dependent symbols in it) with the example inputs fake tensors of static
    shapes, as dynamo's are for a static graph. `options`: a non-Inductor backend's kwargs
    (Inductor's options are config patches its caller applies)."""

    def __init__(self, gm, backend, options=None):
        self.gm, self.backend, self.options, self.fn = gm, backend, options or {}, None

    def __call__(self, *inputs):
        self.compile(inputs)
        return self.fn(*inputs)

    def compile(self, inputs):
        """The backend's compile with `inputs` as the example, once (a later call reuses it)."""
        if self.fn is None:
            with static_tracing(inputs) as example:
                self.fn = backend_compile(self.backend, self.options, self.gm, example)


def backend_compile(backend, options, gm, example_inputs):
    """What the dynamo backend named `backend` compiles `gm` to, called as dynamo calls it:
    Inductor with the config in force (its options are config patches its caller applies), any
    other backend with `options` as torch.compile's options."""
    if backend == "inductor":
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend("inductor")(gm, example_inputs)
    return torch._TorchCompileWrapper(backend, None, options, None)(gm, example_inputs)


def compile_for(gm, backend, options, dynamic=None):
    """A dynamo backend's compile of gm: Inductor's options are its config keys
    (inductor_settings); any other backend gets them as kwargs. A static graph is handed to the
    backend (Handoff); `dynamic`: a symbolic graph goes through torch.compile(dynamic=True),
    whose dynamo makes the ShapeEnv the backend compiles against."""
    opts = {} if backend == "inductor" else {k: parse_option(v) for k, v in (options or {}).items()}
    if dynamic:
        compiled = torch.compile(gm, backend=backend, fullgraph=True, dynamic=True, **({"options": opts} if opts else {}))
    else:
        compiled = Handoff(gm, backend, opts)
    if backend == "inductor":
        import torch._inductor.config as cfg
        return lambda *xs: _with_config(cfg, inductor_settings(options), compiled, xs)
    return compiled


def _with_config(cfg, patch, fn, xs):
    with cfg.patch(patch):
        return fn(*xs)


def load_dir(here):
    """(manifest, GraphModule, inputs) of a one-graph repro dir."""
    d = ReproDirGraph(here)
    return d.manifest, d.module(), d.inputs()


class ReproDirGraph:
    """A graph of a repro dir as repro.py runs it (the first; `graph(index)` another, sharing what
    was read): the graph rebuilt fresh for each run (a train run's parameters collect their own
    gradients), its inputs, and what a train run differentiates and feeds its backward
    (docs/format.md: requires_grad, tangents)."""

    def __init__(self, here):
        self.here = here
        with open(os.path.join(here, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.tensors = load_tensors(os.path.join(here, self.manifest.get("tensors", "tensors.safetensors")))
        self.train = self.manifest.get("mode") == "train"
        self._read(0)

    def _read(self, index):
        self.entry = self.manifest["graphs"][index]
        with open(os.path.join(self.here, self.entry["file"])) as f:
            self.gjson = json.load(f)
        self.input_names = [n["name"] for n in self.gjson["nodes"] if n["op"] == "placeholder"]

    def graph(self, index):
        """The dir's `index`th graph, its manifest and tensors the ones already read."""
        other = copy.copy(self)
        other._read(index)
        return other

    def differentiates(self, key):
        return differentiates(self.entry, key)

    def module(self):
        gm = graph_from_json(self.gjson, self.tensors, parameters=self.differentiates if self.train else False)
        gm.parity_symbols = self.gjson.get("symbols") or {}  # a symbolic graph: compiled as dynamic
        return gm

    def inputs(self):
        return placeholder_values(self.gjson, self.entry, self.tensors)

    def tangents(self):
        return tangents(self.entry, self.tensors)


def differentiates(entry, name):
    """Whether a train run of a graph (its manifest entry) differentiates an input (placeholder
    name) or a parameter (tensor key)."""
    wanted = entry.get("requires_grad")
    return wanted is None or name in wanted


def tangents(entry, tensors):
    """The gradients the program's backward fed to a graph's outputs (train captures of real
    programs; docs/format.md); [] when the graph's first output is a loss."""
    return [None if k is None else tensors[k] for k in entry.get("tangents", [])]


def _map_arguments(gm, follow):
    """`follow` applied to every constant argument of every call in gm's graph and in every graph
    inside it (higher-order ops' subgraphs); gm rewritten in place."""
    for m in gm.modules():
        if not isinstance(m, fx.GraphModule):
            continue
        for n in m.graph.nodes:
            if n.op == "call_function":
                n.args, n.kwargs = fx.node.map_aggregate(n.args, follow), fx.node.map_aggregate(n.kwargs, follow)
        m.recompile()
    return gm


def on_device(gm, device):
    """gm on `device` as parity's interpreter runs a graph there (interpreter/operands.cpp): its
    parameters and buffers moved, and every device argument (a factory op's device=, a
    _to_copy's) the run's device, in its subgraphs too. A dir captured on the CPU and run on a GPU
    would otherwise make some tensors on the CPU. A device without an index ("cuda") is its
    current one, where tensors made on it land: a graph's own device checks (export's
    _assert_tensor_metadata) compare with the index."""
    dev = torch.device(device)
    module = getattr(torch, dev.type, None)
    if dev.index is None and hasattr(module, "current_device") and dev.type != "cpu":
        dev = torch.device(dev.type, module.current_device())
    return _map_arguments(gm.to(dev), lambda a: dev if isinstance(a, torch.device) else a)


def in_run_dtype(gm, dtype):
    """A copy of gm for a run in the floating `dtype` (the fp64 reference), by parity's one rule
    (interpreter/layout.h, Followed): floating parameters and buffers and every floating dtype
    argument take `dtype`, a complex dtype argument its complex counterpart, in gm's graph and in
    every graph inside it (higher-order ops' subgraphs). So a graph that pins a dtype (autocast's
    casts to bfloat16, a factory op's dtype=float32) computes in `dtype` throughout instead of
    mixing it with the pinned one; factory ops with no dtype follow it as torch's default dtype
    (default_dtype)."""
    complex_run = {torch.float64: torch.complex128, torch.float32: torch.complex64}.get(dtype)

    def follow(v):
        if isinstance(v, torch.dtype):
            return dtype if v.is_floating_point else complex_run if v.is_complex and complex_run else v
        return v
    return _map_arguments(copy.deepcopy(gm).to(dtype), follow)


class default_dtype:  # noqa: N801 (a context manager)
    """torch's default dtype set to a floating `dtype` (None: left as it is) while inside."""

    def __init__(self, dtype):
        self.dtype, self.saved = dtype, None

    def __enter__(self):
        if self.dtype is not None and self.dtype.is_floating_point:
            self.saved = torch.get_default_dtype()
            torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        if self.saved is not None:
            torch.set_default_dtype(self.saved)


def _attr_keys(gm):
    """Module attribute -> tensor key in the repro dir, for every get_attr."""
    return {n.target: n.meta["parity_target"] for n in gm.graph.nodes if n.op == "get_attr" and "parity_target" in n.meta}


def train_results(gm, tangents, input_names, out, inputs, sgd_lr):
    """What a train run reports, in order (the contract parity's C++ reference shares, contract.py):
    the loss (or, for a graph captured with the gradients its program fed to its outputs, every
    output, and the backward of those gradients), the gradients of the parameters and of the
    floating inputs it differentiates (None -> zeros), the parameters after one SGD step."""
    res = {}
    if tangents:
        roots, grads = [], []
        for k, (o, t) in enumerate(zip(out, tangents)):
            res[f"output/{k}"] = as_output(o).detach()
            if t is not None and isinstance(o, torch.Tensor) and o.requires_grad:
                roots.append(o)
                grads.append(t.to(o.device, o.dtype))
        if roots:
            torch.autograd.backward(roots, grads)
    else:
        loss = out[0]
        loss.backward()
        res["loss"] = loss.detach()
    keys = _attr_keys(gm)
    params = list(gm.named_parameters())

    def grad_of(t):  # None -> zeros; a sparse gradient (nn.Embedding(sparse=True)'s) as its dense value
        g = t.grad if t.grad is not None else torch.zeros_like(t)
        return (g.to_dense() if g.is_sparse else g).detach()

    for attr, p in params:
        res[f"grad/{keys[attr]}"] = grad_of(p)
    for name, x in zip(input_names, inputs):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            res[f"grad/input/{name}"] = grad_of(x)
    with torch.no_grad():
        for attr, p in params:
            res[f"sgd/{keys[attr]}"] = (p - sgd_lr * grad_of(p)).detach()
    return res


def run(fn, inputs, device, dtype=None, train=None):
    """Results of fn (a module already on `device`, or its compiled form) on the inputs, floating
    ones in `dtype` when given (fn then in_run_dtype's copy: the rule is in the graph), by name:
    the outputs, or with `train` (gm, the ReproDirGraph) what a train run reports (train_results,
    its floating differentiated inputs requiring grad)."""
    def cast(t):
        if not isinstance(t, torch.Tensor):  # a size of a symbolic graph
            return t
        return t.to(device, dtype) if dtype is not None and t.is_floating_point() else t.to(device)
    xs = [cast(x) for x in inputs]
    torch.manual_seed(SEED)
    if train is None:
        with torch.no_grad(), default_dtype(dtype):
            return {f"output/{k}": as_output(o).detach().cpu() for k, o in enumerate(fn(*xs))}
    gm, d = train
    xs = [x.detach().clone().requires_grad_(True) if isinstance(x, torch.Tensor) and differentiable(x)
          and d.differentiates(name) else x for x, name in zip(xs, d.input_names)]
    with torch.enable_grad(), default_dtype(dtype):
        out = fn(*xs)
        res = train_results(gm, d.tangents(), d.input_names, out, xs, SGD_LR)
    return {k: v.detach().cpu() for k, v in res.items()}


def deterministic_setup():
    """What PyTorch's benchmark runner sets for accuracy checks, and parity's reference too."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def main(here, dynamo_backend):
    """Eager, float64 and the backend on the repro dir `here` (a train dir: forward and backward,
    as parity runs it); exit 1 when the backend's result fails the check (the bug reproduces), 0
    when not, 2 when the backend has no Python path."""
    deterministic_setup()
    d = ReproDirGraph(here)
    backend = d.manifest.get("backend", {})
    if not dynamo_backend:
        print(f"backend {backend.get('name')} runs in parity's C++ runtime: parity repro run {shlex.quote(here)} "
              f"--backend {backend.get('name')}")
        return 2
    device = d.manifest.get("device", "cpu")
    tol = d.manifest.get("failure", {}).get("tol", 1e-4)
    inputs = d.inputs()

    def results(dtype=None, compiled=False):
        gm = on_device(d.module(), device)  # each run from fresh parameters
        if dtype is not None:
            gm = in_run_dtype(gm, dtype)
        fn = gm
        if compiled:
            torch._dynamo.reset()
            fn = compile_for(gm, dynamo_backend, backend.get("options"), True if gm.parity_symbols else None)
        return run(fn, inputs, device, dtype, (gm, d) if d.train else None)

    ref, fp64, res = results(), results(torch.float64), results(compiled=True)
    bad = []
    for name, a in ref.items():
        b, c = res[name], fp64[name]
        ok, rule, message = same_tensor(a, b, c, tol=tol, equal_nan=True, ignore_non_fp=True)
        err = (a.double() - b.double()).abs().max().item() if a.numel() and a.shape == b.shape else float("nan")
        print(f"{name}: {'ok' if ok else 'FAIL'} ({rule}) max abs error {err:.3g} {message}")
        if not ok:
            bad.append(name)
    print("REPRODUCED: the backend's result fails the check" if bad else "not reproduced")
    return 1 if bad else 0
