"""Ops that write their inputs, as the recorded graph holds them.

Functionalization (torch.export, AOTAutograd) records a call of an op that writes its arguments
(a `torch.library` custom op with `mutates_args`: a KV-cache update, a fused optimizer kernel) as
`auto_functionalized(op, **kwargs)` or `auto_functionalized_v2(op, _all_bases=[...], **kwargs)`:
a higher-order op whose first argument is the operator, which clones what the op writes, runs it
on the clones and returns its outputs followed by the clones. `mutating_calls` rewrites each such
node, in place, into the ATen clones, the views of them the op writes through (v2 regenerates
them from its bases: alias, as_strided or slice) and the op's own call on them, which is what
torch's dense implementation of the higher-order op runs (and what Inductor lowers it to). The
graph then holds plain op calls the format, the interpreter and every backend know; the values
after the write are the clones, read after the call, as any later node reads them.

The getitem nodes that read the op's outputs and the written values keep their names (a graph
signature names them): each becomes the op call or a clone itself, moved where the write needs
it."""
from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional

import torch
import torch.fx as fx

from .errors import CaptureError

aten = torch.ops.aten


def _wrappers() -> Dict[Any, str]:
    try:
        from torch._higher_order_ops.auto_functionalize import auto_functionalized, auto_functionalized_v2
    except ImportError:  # a torch without them records none
        return {}
    return {auto_functionalized: "v1", auto_functionalized_v2: "v2"}


def mutating_calls(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrites every auto_functionalized / auto_functionalized_v2 node of `gm` (not of its
    subgraphs: each subgraph is rewritten when it is written) as described above."""
    kinds = _wrappers()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in kinds]
    for n in nodes:
        _rewrite(gm.graph, n, kinds[n.target])
    if nodes:
        gm.graph.lint()
        gm.recompile()
    return gm


def _rewrite(graph: fx.Graph, node: fx.Node, kind: str) -> None:
    op = node.args[0] if node.args else node.kwargs.get("_mutable_op")
    if not isinstance(op, torch._ops.OpOverload):
        what = op.name() if isinstance(op, torch._ops.HigherOrderOperator) else repr(op)
        raise CaptureError(f"node {node.name}: {what} writes its inputs (a region that writes state, as a BatchNorm's "
                           f"running statistics in train mode, inside a checkpointed block), which is not supported")
    schema = op._schema
    writes = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    kwargs = {k: v for k, v in node.kwargs.items() if k != "_mutable_op"}
    n_out = len(schema.returns)
    offset = max(n_out, 1)  # the higher-order op returns (out, *written) or (*outs, *written)
    vals = node.meta.get("val")
    vals = list(vals) if isinstance(vals, (list, tuple)) else []
    readers = _readers(node)
    with graph.inserting_before(node):
        if kind == "v1":
            for name in ("_only_clone_these_tensors",):
                kwargs.pop(name, None)
            written = []
            for j, name in enumerate(writes):
                kwargs[name] = _clone(graph, node, kwargs.get(name), readers.get(offset + j), _val(vals, offset + j))
                written.append(kwargs[name])
        else:
            written = _regenerate_views(graph, node, op, writes, kwargs, readers, vals, offset)
        args, kw = _positional(schema, kwargs, node)
        call = _call(graph, node, op, args, kw, readers, n_out, vals)
    for i, reader in readers.items():
        if i < n_out and n_out > 1:
            reader.args = (call, i)
    for stale in list(node.users):  # the extra readers of an index already rewritten
        i = stale.args[1]
        stale.replace_all_uses_with(call if (i < n_out and n_out == 1) else readers[i])
        graph.erase_node(stale)
    graph.erase_node(node)


def _readers(node: fx.Node) -> Dict[int, fx.Node]:
    """The first getitem node reading each index of `node`'s result."""
    readers: Dict[int, fx.Node] = {}
    for u in node.users:
        if u.op != "call_function" or u.target is not operator.getitem or not isinstance(u.args[1], int):
            raise CaptureError(f"node {node.name}: its result is read by {u.name} other than by index")
        readers.setdefault(u.args[1], u)
    return readers


def _val(vals: List[Any], i: int) -> Any:
    return vals[i] if i < len(vals) else None


def _clone(graph: fx.Graph, node: fx.Node, value: Any, reader: Optional[fx.Node], val: Any) -> Any:
    """The clone of `value` the op writes: `reader` (the getitem reading the written value) turned
    into that clone and moved before `node`, else a new clone node. None stays None."""
    if value is None:
        return None
    if not isinstance(value, fx.Node):
        raise CaptureError(f"node {node.name}: writes {value!r}, which is not a tensor node (a list of tensors "
                           "written by a custom op is not supported)")
    if reader is not None:
        node.prepend(reader)
        reader.target, reader.args, reader.kwargs = aten.clone.default, (value,), {}
        return reader
    clone = graph.call_function(aten.clone.default, (value,))
    _meta(clone, node, val if val is not None else value.meta.get("val"))
    return clone


def _regenerate_views(graph, node, op, writes, kwargs, readers, vals, offset) -> List[Any]:
    """auto_functionalized_v2: the bases' clones (the written values, in order), and each written
    argument as a view of its base's clone, put into `kwargs` in its name."""
    bases = kwargs.pop("_all_bases", [])
    kwargs.pop("_only_clone_these_bases", None)
    if "_op_schema" in kwargs:
        raise CaptureError(f"node {node.name}: auto_functionalized_v2 of a higher-order op is not supported")
    clones = [_clone(graph, node, b, readers.get(offset + j), _val(vals, offset + j)) for j, b in enumerate(bases)]
    for name in writes:
        prefix = f"_{name}"
        if f"{prefix}_length" in kwargs or f"{prefix}_dtype" in kwargs:
            raise CaptureError(f"node {node.name}: {op} writes {name} as a list or an out= argument, not supported")
        index = kwargs.pop(f"{prefix}_base_index", None)
        if index is None:
            kwargs[name] = None
            continue
        base = clones[index]
        if kwargs.pop(f"{prefix}_alias", None) is not None:
            view = graph.call_function(aten.alias.default, (base,))
        elif f"{prefix}_storage_offset" in kwargs:
            size, stride = kwargs.pop(f"{prefix}_size"), kwargs.pop(f"{prefix}_stride")
            view = graph.call_function(aten.as_strided.default, (base, size, stride, kwargs.pop(f"{prefix}_storage_offset")))
        elif f"{prefix}_slice_dim" in kwargs:
            dim, start, end = (kwargs.pop(f"{prefix}_slice_{k}") for k in ("dim", "start", "end"))
            view = graph.call_function(aten.slice.Tensor, (base, dim, start, end))
        else:
            kwargs[name] = base
            continue
        _meta(view, node, _fake_view(view, base))
        kwargs[name] = view
    return clones


def _fake_view(view: fx.Node, base: fx.Node) -> Any:
    """The view's value on the base's fake value (for its recorded dtype and shape); None when the
    base has none."""
    b = base.meta.get("val")
    if not isinstance(b, torch.Tensor):
        return None
    args = [b if a is base else a for a in view.args]
    if any(isinstance(a, fx.Node) for a in args):
        return None
    try:
        return view.target(*args)
    except Exception:  # noqa: BLE001 - the value is only metadata
        return None


def _positional(schema, kwargs: Dict[str, Any], node: fx.Node):
    """The op's arguments from the higher-order op's keywords: positional in schema order while
    given, the keyword-only ones and any after a missing one (left to its default) as keywords."""
    args, kw, gap = [], {}, False
    for a in schema.arguments:
        if a.name not in kwargs:
            if not a.has_default_value():
                raise CaptureError(f"node {node.name}: argument {a.name} of {schema.name} is missing")
            gap = True
            continue
        if a.kwarg_only or gap:
            kw[a.name] = kwargs[a.name]
        else:
            args.append(kwargs[a.name])
    return tuple(args), kw


def _call(graph, node, op, args, kw, readers, n_out, vals) -> fx.Node:
    """The op's call: the getitem reading its one output, turned into the call, where there is
    one; else a new node."""
    if n_out == 1 and 0 in readers:
        call = readers[0]
        node.prepend(call)
        call.target, call.args, call.kwargs = op, args, kw
        return call
    call = graph.call_function(op, args, kw)
    _meta(call, node, vals[0] if n_out == 1 and vals else tuple(vals[:n_out]) if n_out > 1 else None)
    return call


def _meta(new: fx.Node, like: fx.Node, val: Any) -> None:
    for k in ("stack_trace", "nn_module_stack", "source_fn_stack", "seq_nr"):
        if k in like.meta:
            new.meta[k] = like.meta[k]
    if val is not None:
        new.meta["val"] = val
