"""The graph reader and the eager / fp64 / backend check that a standalone repro.py runs.

Needs only torch and safetensors: `parity minify` inlines this file and same.py into
minified/repro.py (repro_script.py), and the package uses the same code (reader.py), so the
script and parity read graphs and judge results alike. Reading never executes code from a repro
dir: targets resolve only among torch.ops and operator.getitem. Lines marked `package-only` are
left out of the script."""
import copy
import json
import operator
import os
import sys

import torch
import torch.fx as fx
from safetensors.torch import load_file

from parity_capture.same import same_tensor  # package-only

FORMAT_VERSION = 1
GETITEM = "getitem"


def resolve_target(name):
    if name == GETITEM:
        return operator.getitem
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload or "default")


def decode_arg(a, env):
    if isinstance(a, list):
        return [decode_arg(x, env) for x in a]
    if isinstance(a, dict):
        (tag, v), = a.items()
        if tag == "node":
            return env[v]
        if tag == "float":
            return float(v)
        if tag in ("dtype", "layout", "memory_format"):
            return getattr(torch, v)
        if tag == "device":
            return torch.device(v)
        raise ValueError(f"unknown tag {tag}")
    return a


def _dense(shape, stride):
    """Whether `stride` lays out `shape` densely without overlap (size-1 dims: any stride)."""
    expected = 1
    for size, st in sorted(((sz, st) for sz, st in zip(shape, stride) if sz != 1), key=lambda d: d[1]):
        if size == 0 or st != expected:
            return False
        expected *= size
    return True


def captured_layout(t, node):
    """`t` (stored contiguous) in the layout its node recorded at capture (meta.val strides), as
    parity's interpreter restores it: a graph traced on channels_last or transposed inputs may
    hold views legal only on that layout."""
    val = (node.get("meta") or {}).get("val") or [None]
    m = val[0] if isinstance(val, list) else None
    if not m or "stride" not in m or list(t.shape) != list(m["shape"]) or list(t.stride()) == list(m["stride"]):
        return t
    if len(m["stride"]) != t.dim() or not _dense(m["shape"], m["stride"]):
        return t
    return torch.empty_strided(m["shape"], m["stride"], dtype=t.dtype, device=t.device).copy_(t)


def _attr_node(g, root, n, attrs, parameters):
    attr = "_attr_" + "".join(c if c.isalnum() else "_" for c in n["target"])
    if not hasattr(root, attr):
        t = captured_layout(attrs[n["target"]], n)
        wanted = parameters(n["target"]) if callable(parameters) else parameters
        if wanted and n["target"].startswith("param/") and t.is_floating_point():
            root.register_parameter(attr, torch.nn.Parameter(t.detach().clone()))
        else:
            root.register_buffer(attr, t)
    node = g.get_attr(attr)
    node.meta["parity_target"] = n["target"]
    return node


def graph_from_json(gjson, attrs, parameters=False):
    """Rebuilds a GraphModule. With `parameters` (True, or a predicate over tensor keys), floating
    get_attr tensors under "param/" become nn.Parameters (train mode), the rest buffers."""
    if gjson.get("version") != FORMAT_VERSION:
        raise ValueError(f"graph format version {gjson.get('version')} is not {FORMAT_VERSION}")
    root, g, env = torch.nn.Module(), fx.Graph(), {}
    for n in gjson["nodes"]:
        op = n["op"]
        if op == "placeholder":
            node = g.placeholder(n["name"])
        elif op == "get_attr":
            node = _attr_node(g, root, n, attrs, parameters)
        elif op == "call_function":
            args = tuple(decode_arg(a, env) for a in n.get("args", []))
            kwargs = {k: decode_arg(v, env) for k, v in n.get("kwargs", {}).items()}
            node = g.call_function(resolve_target(n["target"]), args, kwargs)
        elif op == "output":
            node = g.output(tuple(decode_arg(a, env) for a in n["args"][0]))
        else:
            raise ValueError(f"unknown op {op}")
        node.name = n["name"]
        if "stack_trace" in n.get("meta", {}):
            node.meta["stack_trace"] = n["meta"]["stack_trace"]
        env[n["name"]] = node
    g.lint()
    return fx.GraphModule(root, g)


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


def compile_for(gm, backend, options):
    """torch.compile with a dynamo backend: Inductor's options are its config keys
    (inductor_settings); any other backend gets them as kwargs."""
    if backend == "inductor":
        import torch._inductor.config as cfg
        compiled = torch.compile(gm, backend="inductor", fullgraph=True)
        return lambda *xs: _with_config(cfg, inductor_settings(options), compiled, xs)
    opts = {k: parse_option(v) for k, v in (options or {}).items()}
    return torch.compile(gm, backend=backend, fullgraph=True, **({"options": opts} if opts else {}))


def _with_config(cfg, patch, fn, xs):
    with cfg.patch(patch):
        return fn(*xs)


def load_dir(here):
    """(manifest, GraphModule, inputs) of a one-graph repro dir."""
    with open(os.path.join(here, "manifest.json")) as f:
        manifest = json.load(f)
    tensors = load_file(os.path.join(here, manifest.get("tensors", "tensors.safetensors")))
    entry = manifest["graphs"][0]
    with open(os.path.join(here, entry["file"])) as f:
        gjson = json.load(f)
    gm = graph_from_json(gjson, tensors)
    placeholders = [n for n in gjson["nodes"] if n["op"] == "placeholder"]
    return manifest, gm, [captured_layout(tensors[entry["inputs"][n["name"]]], n) for n in placeholders]


def run(fn, inputs, device, dtype=None):
    """Outputs of fn (a module already on `device`, or its compiled form) on the inputs, floating
    ones in `dtype` when given."""
    def cast(t):
        return t.to(device, dtype) if dtype is not None and t.is_floating_point() else t.to(device)
    torch.manual_seed(1337)
    with torch.no_grad():
        return [o.detach().cpu() for o in fn(*[cast(x) for x in inputs])]


def deterministic_setup():
    """What PyTorch's benchmark runner sets for accuracy checks, and parity's reference too."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def main(here, dynamo_backend):
    """Eager, float64 and the backend on the repro dir `here`; exit 1 when the backend's result
    fails the check (the bug reproduces), 0 when not, 2 when the backend has no Python path."""
    deterministic_setup()
    manifest, gm, inputs = load_dir(here)
    backend = manifest.get("backend", {})
    if not dynamo_backend:
        print(f"backend {backend.get('name')} runs in parity's C++ runtime: parity repro run {here} --backend {backend.get('name')}")
        return 2
    device = manifest.get("device", "cpu")
    tol = manifest.get("failure", {}).get("tol", 1e-4)
    gm = gm.to(device)
    ref = run(gm, inputs, device)
    fp64 = run(copy.deepcopy(gm).to(torch.float64), inputs, device, torch.float64)
    torch._dynamo.reset()
    res = run(compile_for(gm, dynamo_backend, backend.get("options")), inputs, device)
    bad = []
    for i, (a, b, c) in enumerate(zip(ref, res, fp64)):
        ok, rule, message = same_tensor(a, b, c, tol=tol, equal_nan=True, ignore_non_fp=True)
        err = (a.double() - b.double()).abs().max().item() if a.numel() and a.shape == b.shape else float("nan")
        print(f"output {i}: {'ok' if ok else 'FAIL'} ({rule}) max abs error {err:.3g} {message}")
        if not ok:
            bad.append(i)
    print("REPRODUCED: the backend's result fails the check" if bad else "not reproduced")
    return 1 if bad else 0
