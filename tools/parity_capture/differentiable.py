"""Calls autograd cannot differentiate, as calls it can that compute the same values.

A train graph's backward is not recorded: the interpreter and every backend differentiate the
recorded forward themselves (as AOTAutograd does for a backend). Functionalization writes an
in-place op as its functional twin (`buf.copy_(x)` as `aten.copy`, `z[:, :k] = w` as
`aten.slice_scatter`, `z.zero_()` as `aten.zero`), and, where it removes views too (make_fx's
lowering), a view as its copy twin (`slice_copy`, `detach_copy`). Some twins have no derivative
where the program's op had one: `copy` and `detach_copy` have none for any dtype, and
`slice_scatter`, `select_scatter`, `zero` and several copy twins (`slice_copy`, `select_copy`,
`view_as_complex_copy`, ...) refuse complex values (autograd takes complex values only through
the ops torch lists). A graph holding one failed every run of it in train mode, the eager
reference and each backend alike (an FNO's `out[..., :modes] = ...`, a model copying into a
buffer it made).

`differentiable_calls` rewrites each such call, in place, into ops with derivatives: the call's
node keeps its name, its recorded value and its place (it becomes the last op of the rewrite),
the ops before it are new. The values are the same bit for bit (copies, casts and views); the
gradients are the ones the program's ops had. `_REWRITES` is the one table (the op, the values
it is rewritten for, and how), with one rule for the view ops' copy twins (`_rule`)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.fx as fx

aten = torch.ops.aten


def _val(a: Any) -> Optional[torch.Tensor]:
    v = a.meta.get("val") if isinstance(a, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _add(graph: fx.Graph, like: fx.Node, op, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None) -> fx.Node:
    """A new call before `like`, with `like`'s source facts and its value computed on the
    arguments' recorded values (metadata only)."""
    kwargs = kwargs or {}
    with graph.inserting_before(like):
        n = graph.call_function(op, args, kwargs)
    for k in ("stack_trace", "nn_module_stack", "source_fn_stack", "seq_nr"):
        if k in like.meta:
            n.meta[k] = like.meta[k]
    val = _value_of(op, args, kwargs)
    if val is not None:
        n.meta["val"] = val
    return n


def _value_of(op, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[torch.Tensor]:
    """`op`'s value on the arguments' recorded values: on them as they are (fake values of one
    trace), else on meta tensors of their sizes and strides (a real trace records each value
    in a fake mode of its own, which do not mix); None where neither computes it."""
    vals = [_val(a) if isinstance(a, fx.Node) else a for a in args]
    if any(v is None for v, a in zip(vals, args) if isinstance(a, fx.Node)):
        return None
    try:
        return op(*vals, **kwargs)
    except Exception:  # noqa: BLE001 - the value is only metadata
        pass
    try:
        metas = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
                 if isinstance(v, torch.Tensor) else v for v in vals]
        return op(*metas, **{k: ("meta" if k == "device" else v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - sizes a meta tensor cannot take (symbolic ones)
        return None


def _same_sizes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two recorded values have the same sizes, symbolic ones compared as expressions
    (never guarding on them)."""
    return a.dim() == b.dim() and all(str(x) == str(y) for x, y in zip(a.shape, b.shape))


def _copy(graph: fx.Graph, node: fx.Node) -> None:
    """copy(self, src): src in self's dtype and device, broadcast to self's sizes, as a new
    tensor. Its derivative is copy_'s: none to self, the gradient (reduced to src's sizes, in
    src's dtype) to src."""
    self_, src = node.args[0], node.args[1]
    sv, xv = _val(self_), _val(src)
    x = src
    if xv.dtype != sv.dtype or xv.device != sv.device:
        x = _add(graph, node, aten._to_copy.default, (x,), {"dtype": sv.dtype, "device": sv.device})
    if not _same_sizes(xv, sv):
        x = _add(graph, node, aten.expand_as.default, (x, self_))
    node.target, node.args, node.kwargs = aten.clone.default, (x,), {}


def _scatter_as_real(graph: fx.Graph, node: fx.Node) -> None:
    """slice_scatter / select_scatter of complex values: the same scatter of their real views
    (view_as_real: the real and imaginary parts as a last dim of 2), viewed back as complex."""
    self_, src = node.args[0], node.args[1]
    rest = list(node.args[2:])
    ndim = _val(self_).dim()
    dim = rest[0] if rest else node.kwargs.get("dim", 0)
    kwargs = dict(node.kwargs)
    if dim < 0:  # counted from the end, it would name the real views' new last dim
        dim += ndim
    if rest:
        rest[0] = dim
    else:
        kwargs["dim"] = dim
    real_self = _add(graph, node, aten.view_as_real.default, (self_,))
    real_src = _add(graph, node, aten.view_as_real.default, (src,))
    scattered = _add(graph, node, node.target, (real_self, real_src, *rest), kwargs)
    node.target, node.args, node.kwargs = aten.view_as_complex.default, (scattered,), {}


def _zeros_like(graph: fx.Graph, node: fx.Node) -> None:
    """zero(self) of complex values: zeros like self (its derivative is none to self either way)."""
    node.target, node.args, node.kwargs = aten.zeros_like.default, (node.args[0],), {}


def _as_view_and_clone(graph: fx.Graph, node: fx.Node) -> None:
    """A view op's copy twin (`slice_copy`, what functionalization writes when it removes views):
    the view op itself, cloned."""
    view = _add(graph, node, _view_twin(node.target), node.args, node.kwargs)
    node.target, node.args, node.kwargs = aten.clone.default, (view,), {}


def _view_twin(op) -> Any:
    """The view op `op` (tagged view_copy) is the copy twin of; None where torch has none."""
    name = op._schema.name.split("::")[-1]
    packet = getattr(aten, name[: -len("_copy")], None) if name.endswith("_copy") else None
    return getattr(packet, op._overloadname, None) if packet is not None else None


def _any(v: torch.Tensor) -> bool:
    return True


def _complex(v: torch.Tensor) -> bool:
    return v.dtype.is_complex


# op -> (whether a call's value needs the rewrite, the rewrite)
_REWRITES: Dict[Any, Tuple[Callable[[torch.Tensor], bool], Callable[[fx.Graph, fx.Node], None]]] = {
    aten.copy.default: (_any, _copy),
    aten.slice_scatter.default: (_complex, _scatter_as_real),
    aten.select_scatter.default: (_complex, _scatter_as_real),
    aten.zero.default: (_complex, _zeros_like),
    aten.detach_copy.default: (_any, _as_view_and_clone),  # no derivative at all
}
# Every other view op's copy twin (tagged view_copy: slice_copy, select_copy, view_as_complex_copy,
# ...) for complex values: several refuse them, and the view op never does.
_VIEW_COPIES = (_complex, _as_view_and_clone)


def _rule(op) -> Optional[Tuple[Callable[[torch.Tensor], bool], Callable[[fx.Graph, fx.Node], None]]]:
    if op in _REWRITES:
        return _REWRITES[op]
    if isinstance(op, torch._ops.OpOverload) and torch.Tag.view_copy in op.tags and _view_twin(op) is not None:
        return _VIEW_COPIES
    return None


def differentiable_calls(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrites every call `_rule` names in `gm` (not in its subgraphs: each subgraph is
    rewritten when it is written) whose recorded value needs it. A call without recorded values
    (its self's and its own) is left as it is: nothing says what it computes in."""
    changed = False
    for n in list(gm.graph.nodes):
        rule = _rule(n.target) if n.op == "call_function" else None
        if rule is None or _val(n) is None or not n.args or _val(n.args[0]) is None:
            continue
        if n.target is aten.copy.default and (len(n.args) < 2 or _val(n.args[1]) is None):
            continue
        needs, rewrite = rule
        if needs(_val(n)):
            rewrite(gm.graph, n)
            changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm
