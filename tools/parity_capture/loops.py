"""How many iterations each while_loop of a recorded graph ran: the graph (as repro.py reads it)
run once on its recorded inputs, each while_loop call counting its condition's calls, and the
largest count of a node written into its JSON as `meta.iterations` (docs/format.md). parity's
interpreter stops a loop that runs far longer than that (interpreter/hops.cpp WhileLimit): a
file whose condition never turns false ends in an error, never in a run that does not end.
Where the graph cannot run here, nothing is recorded (the interpreter's ceiling holds)."""
from __future__ import annotations

from typing import Any, Dict, List

import torch
import torch.fx as fx

from .standalone import on_device
from .standalone_graph import graph_from_json, placeholder_values

_WHILE = "hop::while_loop"


def _holds_while(gjson: Dict[str, Any]) -> bool:
    return any(n.get("target") == _WHILE for n in gjson["nodes"]) or \
        any(_holds_while(s) for s in (gjson.get("subgraphs") or {}).values())


def _counting(counts: Dict[str, int], key: str):
    """torch's while_loop, counting how often this call's condition says go on."""
    real = torch.ops.higher_order.while_loop

    def while_loop(cond_fn, body_fn, carried, additional):
        calls = [0]

        def cond(*xs):
            calls[0] += 1
            return cond_fn(*xs)
        out = real(cond, body_fn, carried, additional)
        counts[key] = max(counts.get(key, 0), calls[0] - 1)
        return out
    return while_loop


def _instrument(gm: fx.GraphModule, gjson: Dict[str, Any], counts: Dict[str, int], where: List[Dict[str, Any]]) -> None:
    """Every while_loop node of gm (and of the graph modules inside it) calls _counting, keyed by
    its position in `where` (the JSON node it was read from)."""
    subs = gjson.get("subgraphs") or {}
    by_name = {n["name"]: n for n in gjson["nodes"]}
    for n in gm.graph.nodes:
        if n.op == "call_function" and by_name.get(n.name, {}).get("target") == _WHILE:
            where.append(by_name[n.name])
            n.target = _counting(counts, str(len(where) - 1))
    gm.recompile()
    for name, sub in subs.items():
        attr = "".join(c if c.isalnum() else "_" for c in name)
        child = getattr(gm, attr, None)
        if isinstance(child, fx.GraphModule):
            _instrument(child, sub, counts, where)


def record_iterations(gjson: Dict[str, Any], entry: Dict[str, Any], tensors: Dict[str, torch.Tensor], device: str = "cpu") -> None:
    """Writes `meta.iterations` into gjson's while_loop nodes (in place); nothing when the graph
    holds none or cannot run here."""
    if not _holds_while(gjson):
        return
    counts: Dict[str, int] = {}
    where: List[Dict[str, Any]] = []
    try:
        gm = on_device(graph_from_json(gjson, tensors), device)
        _instrument(gm, gjson, counts, where)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in placeholder_values(gjson, entry, tensors)]
        with torch.no_grad():
            gm(*inputs)
    except Exception:  # noqa: BLE001 (a graph the reader cannot run here: the interpreter's ceiling holds)
        return
    for k, node in enumerate(where):
        if str(k) in counts:
            node.setdefault("meta", {})["iterations"] = counts[str(k)]
