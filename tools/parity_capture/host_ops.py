"""Host ops: graph ops that are not ATen, registered from Python (torch.library.custom_op,
torch.library.Library). parity's C++ interpreter cannot find them in a fresh process, so capture
records for each what a fresh worker needs to make it callable: its schema and the module whose
import registers it. parity imports such a module (in the worker only) when the user approves it
(--import MODULE or the allow-list in parity's config); loading a repro dir never imports."""
from __future__ import annotations

import sys
from typing import Any, Dict, Iterable, Optional

import torch

NATIVE_NAMESPACES = ("aten", "prims")


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
        if not isinstance(t, torch._ops.OpOverload) or t.namespace in NATIVE_NAMESPACES:
            continue
        s = t._schema
        name = f"{s.name}.{s.overload_name}" if s.overload_name else s.name
        module = registering_module(t) or (explicit[0] if len(explicit) == 1 else None)
        out[name] = {"schema": str(s), "module": module, "path": "host"}
    return out


def describe_graphs(gjsons: Iterable[Dict[str, Any]], imports: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
    """describe() over the call_function targets of serialized graphs."""
    from .standalone import GETITEM, resolve_target
    names = {n["target"] for g in gjsons for n in g["nodes"] if n["op"] == "call_function" and n["target"] != GETITEM}
    return describe((resolve_target(n) for n in sorted(names) if n.split("::")[0] not in NATIVE_NAMESPACES), imports)


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


def _decode(a, tensors):
    if isinstance(a, list):
        return [_decode(x, tensors) for x in a]
    if isinstance(a, dict):
        (tag, v), = a.items()
        if tag == "tensor":
            t, device = tensors[v["key"]], v["device"]
            return t.to(device) if device != "cpu" else t
        if tag == "dtype":
            return getattr(torch, v)
        if tag == "device":
            return torch.device(v)
        if tag == "float":
            return float(v)
        raise ValueError(f"host_call: unknown argument tag {tag}")
    return a


def prepare(op_name: str, args, tensors: Dict[str, torch.Tensor]):
    """The op `ns::op.overload` and its decoded arguments, ready for run()."""
    from .standalone import resolve_target
    return resolve_target(op_name), [_decode(a, tensors) for a in args]


def run(op_name: str, op, decoded):
    """Runs a prepared call; returns its results as a flat list of tensors and the shape of the
    return (tensor, tuple or list)."""
    out = op(*decoded)
    if isinstance(out, torch.Tensor):
        return [out], "tensor"
    if isinstance(out, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in out):
        return list(out), "tuple" if isinstance(out, tuple) else "list"
    raise TypeError(f"host op {op_name} returned {type(out).__name__}; parity handles tensors and tuples of tensors")


def call(op_name: str, args, tensors: Dict[str, torch.Tensor]):
    """prepare() then run()."""
    op, decoded = prepare(op_name, args, tensors)
    return run(op_name, op, decoded)


def backward(op_name: str, args, grads, diff, tensors: Dict[str, torch.Tensor]):
    """The vector-Jacobian product of a host op call: the op recomputed with autograd on the
    arguments, the inputs at positions `diff` differentiated against `grads` (one per output).
    Returns one gradient per differentiable input (zeros where the op does not depend on it)."""
    from .standalone import resolve_target
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
