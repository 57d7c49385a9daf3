"""Host ops: graph ops that are not ATen, registered from Python (torch.library.custom_op,
torch.library.Library). parity's C++ interpreter cannot find them in a fresh process, so capture
records for each what a fresh worker needs to make it callable: its schema and the module whose
import registers it. parity imports such a module (in the worker only) when the user approves it
(--import MODULE or the allow-list in parity's config); loading a repro dir never imports."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

import torch

from .distributed import is_collective

# Ops a C++ process's dispatcher has (the collectives too: parity computes them, distributed.py).
NATIVE_NAMESPACES = ("aten", "prims")


def is_native(target: str) -> bool:
    """Whether an op ("ns::name[.overload]") is one parity's C++ interpreter runs (not a host op)."""
    return target.split("::")[0] in NATIVE_NAMESPACES or is_collective(target)


def registering_module(op: torch._ops.OpOverload) -> Optional[str]:
    """The importable module whose import registers `op`, when it can be found."""
    qualname = op._schema.name
    try:
        from torch._library.custom_ops import OPDEFS
        opdef = OPDEFS.get(qualname)
    except ImportError:
        opdef = None
    fn = getattr(opdef, "_init_fn", None)
    module = getattr(fn, "__module__", None)
    if module and module != "__main__":
        return module
    # A Python kernel registered with torch.library.impl / Library.impl: the module of its function.
    for kernel in getattr(op, "py_kernels", {}).values():
        module = getattr(kernel, "__module__", None)
        if module and module not in ("__main__",) and not module.startswith("torch."):
            return module
    return None


def describe(targets: Iterable[Any], imports: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
    """manifest["host_ops"]: {"ns::op.overload": {"schema", "module", "path": "host"}} for every
    non-ATen OpOverload among `targets`. `imports`: modules given by the user (--import), used when
    an op's own module cannot be found."""
    explicit = list(imports)
    out: Dict[str, Dict[str, Any]] = {}
    for t in targets:
        if not isinstance(t, torch._ops.OpOverload) or is_native(t._schema.name):
            continue
        s = t._schema
        name = f"{s.name}.{s.overload_name}" if s.overload_name else s.name
        module = registering_module(t) or (explicit[0] if len(explicit) == 1 else None)
        out[name] = {"schema": str(s), "module": module, "path": "host"}
    return out


def describe_graphs(gjsons: Iterable[Dict[str, Any]], imports: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
    """describe() over the call_function targets of serialized graphs."""
    from .standalone_graph import GETITEM, resolve_target
    names = {n["target"] for g in gjsons for n in g["nodes"] if n["op"] == "call_function" and n["target"] != GETITEM}
    return describe((resolve_target(n) for n in sorted(names) if not is_native(n)), imports)


IMPORT_ENV = "PARITY_IMPORT"  # the modules `--import` names, comma-separated (runtime/worker.h)


def started_with() -> list:
    """The modules parity's `--import` names for this process (PARITY_IMPORT), in its order."""
    import os
    return [m for m in os.environ.get(IMPORT_ENV, "").split(",") if m]


def import_plugins() -> Dict[str, str]:
    """Imports the modules parity's `--import` names (PARITY_IMPORT): every Python process parity
    starts does, first, so what a backend plugin registers at import (passes, decompositions,
    backends, devices) is in effect wherever a graph is compiled or run. {module: error} for
    those that failed."""
    return import_modules(started_with())


def require_plugins() -> None:
    """import_plugins() for a one-shot child (the profiling child, a rank of a real replay): the
    first module that failed raises ImportError naming it."""
    failed = import_plugins()
    if failed:
        m, err = next(iter(failed.items()))
        raise ImportError(f"--import {m}: cannot import it: {err}")


def import_modules(modules: Iterable[str]) -> Dict[str, str]:
    """Imports each module; returns {module: error} for those that failed."""
    import importlib
    failed = {}
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # reported to parity as exit 2 naming the module
            failed[m] = f"{type(e).__name__}: {e}"
    return failed


class _Result:
    """Argument placeholder: result `output` of call `call` of the same host_batch."""

    def __init__(self, call: int, output: int) -> None:
        self.call, self.output = call, output


def _decode(a, tensors, transfers=None):
    """A JSON argument as Python: a tensor is the view in parity's segment, or its copy on the
    device it lives on in parity, recorded in `transfers` as (copy, view) when given."""
    if isinstance(a, list):
        return [_decode(x, tensors, transfers) for x in a]
    if isinstance(a, dict):
        (tag, v), = a.items()
        if tag == "tensor":
            t, device = tensors[v["key"]], v["device"]
            if device == "cpu":
                return t
            moved = t.to(device)
            if transfers is not None:
                transfers.append((moved, t))
            return moved
        if tag == "dtype":
            return getattr(torch, v)
        if tag == "device":
            return torch.device(v)
        if tag == "float":
            return float(v)
        if tag == "result":  # an earlier call's result in a host_batch
            return _Result(int(v[0]), int(v[1]))
        raise ValueError(f"host_call: unknown argument tag {tag}")
    return a


def _kernel(op, decoded):
    """What to call for `op` on `decoded`: a torch.library.custom_op's kernel for the arguments'
    device itself when it has one (parity's process has passed the dispatcher and autograd
    already: the op reached its host kernel below autograd), else the OpOverload. Ops that mutate,
    write out= arguments or take keyword-only arguments always go through the OpOverload."""
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:
        return op
    opdef = OPDEFS.get(op._schema.name) if op._overloadname == "default" else None
    if opdef is None or getattr(opdef, "_is_inplace", True) or getattr(opdef, "_is_out", True):
        return op
    schema = op._schema
    if any(a.kwarg_only or (a.alias_info is not None and a.alias_info.is_write) for a in schema.arguments):
        return op
    fns = getattr(opdef, "_backend_fns", {})
    devices = {a.device.type for a in decoded if isinstance(a, torch.Tensor)}
    device = next(iter(devices)) if len(devices) == 1 else None
    if device not in fns:
        device = None
    if device not in fns:
        return op
    return _unwrapped(opdef, device, fns[device])


def _unwrapped(opdef, device, wrapper):
    """The function a custom op's registered kernel wrapper calls for `device`: register_kernel
    wraps each kernel in a torch._dynamo.disable frame (nothing compiles in the worker; the frame
    costs as much as a small op) that calls the op's own function when the kernel is disabled.
    The wrapper itself where its shape is not the one known."""
    if device in getattr(opdef, "_disabled_kernel", ()) and callable(getattr(opdef, "_init_fn", None)):
        return opdef._init_fn
    inner = getattr(wrapper, "__wrapped__", None)
    code = getattr(inner, "__code__", None)
    if code is None or not inner.__closure__:
        return wrapper
    cell = dict(zip(code.co_freevars, inner.__closure__)).get("fn")
    try:
        fn = cell.cell_contents if cell is not None else None
    except ValueError:  # an empty cell
        fn = None
    return fn if callable(fn) else wrapper


def prepare(op_name: str, args, tensors: Dict[str, torch.Tensor], transfers=None):
    """The callable for `ns::op.overload` (see _kernel), its decoded arguments and the positions of
    the arguments it writes (`Tensor(a!)`: a custom op's mutates_args), ready for run()."""
    from .standalone_graph import resolve_target
    op = resolve_target(op_name)
    decoded = [_decode(a, tensors, transfers) for a in args]
    written = [i for i, a in enumerate(op._schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    return _kernel(op, decoded), decoded, written


def run(op_name: str, op, decoded, written=()):
    """Runs a prepared call; returns its results as a flat list of tensors, then the tensors it
    wrote (`written` positions given a tensor: parity copies them back into its own arguments),
    and the shape of the return (tensor, tuple, list, or none for an op returning nothing)."""
    out = op(*decoded)
    wrote = [decoded[i] for i in written if isinstance(decoded[i], torch.Tensor)]
    if any(decoded[i] is not None and not isinstance(decoded[i], torch.Tensor) for i in written):
        raise TypeError(f"host op {op_name} writes a list of tensors; parity writes back single tensors only")
    if out is None:
        return wrote, "none"
    if isinstance(out, torch.Tensor):
        return [out] + wrote, "tensor"
    if isinstance(out, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in out):
        return list(out) + wrote, "tuple" if isinstance(out, tuple) else "list"
    raise TypeError(f"host op {op_name} returned {type(out).__name__}; parity handles tensors and tuples of tensors")


class Prepared:
    """Host op calls (one host_call, or the calls of a host_batch) resolved and decoded once, run
    again on the current contents of parity's segment: the arguments are views into it, and
    `transfers` are the (device copy, view) pairs refreshed before a repeat. `places` is where
    its results went last time (shm.write_results keeps it)."""

    __slots__ = ("calls", "transfers", "kind", "places")

    def __init__(self, calls, transfers) -> None:
        self.calls, self.transfers, self.kind, self.places = calls, transfers, "tensor", None

    def run(self, repeat: bool):
        """Every call's results, flat, and how many each call returned."""
        if repeat:
            for moved, view in self.transfers:
                moved.copy_(view)
        results = []
        for name, fn, decoded, refs, written in self.calls:
            args = decoded
            if refs:
                args = list(decoded)
                for k, c, o in refs:
                    args[k] = results[c][o]
            outs, self.kind = run(name, fn, args, written)
            results.append(outs)
        if len(results) == 1:
            return results[0], [len(results[0])]
        return [t for r in results for t in r], [len(r) for r in results]


def prepare_batch(calls, tensors: Dict[str, torch.Tensor]) -> Prepared:
    """The calls [{op, args}] of a host_batch (or the one of a host_call) prepared; an argument
    {"result": [call, output]} takes an earlier call's result."""
    out, transfers = [], []
    for c in calls:
        fn, decoded, written = prepare(c["op"], c["args"], tensors, transfers)
        refs = [(k, a.call, a.output) for k, a in enumerate(decoded) if isinstance(a, _Result)]
        if any(r[1] >= len(out) for r in refs):
            raise ValueError(f"host_batch: call {len(out)} ({c['op']}) takes a result of a later call")
        out.append((c["op"], fn, decoded, refs, written))
    return Prepared(out, transfers)


def backward(op_name: str, args, grads, diff, tensors: Dict[str, torch.Tensor]):
    """The vector-Jacobian product of a host op call: the op recomputed with autograd on the
    arguments, the inputs at positions `diff` differentiated against `grads` (one per output).
    Returns one gradient per differentiable input (zeros where the op does not depend on it)."""
    from .standalone_graph import resolve_target
    op = resolve_target(op_name)
    decoded = [_decode(a, tensors) for a in args]
    inputs = []
    for p in diff:
        decoded[p] = decoded[p].detach().requires_grad_(True)
        inputs.append(decoded[p])
    with torch.enable_grad():
        out = op(*decoded)
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    gs = [_decode(g, tensors) for g in grads]
    pairs = [(o, g) for o, g in zip(outs, gs) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not pairs:
        return [torch.zeros_like(x) for x in inputs]
    got = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True)
    return [g if g is not None else torch.zeros_like(x) for g, x in zip(got, inputs)]
