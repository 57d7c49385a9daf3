"""A symbolic dynamo graph lowered to the format: its size symbols, guards and data-dependent
(unbacked) values recorded, the graph run once on the program's values to fill in what the
program computed."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from .errors import CaptureError
from .lowered import _graph_entry, flatten_outputs, record_constants, written_inputs
from .serialize import graph_to_json
from .standalone_graph import as_output


def unbacked_values(aten: fx.GraphModule, inputs: Sequence[Any]) -> Dict[str, Any]:
    """The values the graph's data-dependent symbols (unbacked: u0 from `.item()`, the size of
    `nonzero`'s result) take when it runs on `inputs` (real values, on the devices the graph
    expects): the graph run once, each node whose metadata is such a symbol, or a tensor with
    such a symbol as a dim, read."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    if not any(free_unbacked_symbols(n.meta.get("val")) for n in aten.graph.nodes if n.op != "output"):
        return {}
    found: Dict[str, Any] = {}

    def read(val, real):
        if isinstance(val, (list, tuple)) and isinstance(real, (list, tuple)):
            for v, r in zip(val, real):
                read(v, r)
        elif isinstance(val, torch.Tensor) and isinstance(real, torch.Tensor):
            for d, r in zip(list(val.shape) + list(val.stride()), list(real.shape) + list(real.stride())):
                read(d, r)
        elif isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and val.node.expr.is_Symbol:
            found.setdefault(str(val.node.expr), real.item() if isinstance(real, torch.Tensor) else real)

    class Reader(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            read(n.meta.get("val"), out)
            return out

    with torch.no_grad():
        Reader(aten).run(*inputs)
    return found


def capture_symbolic_graph(aten: fx.GraphModule, shape_env, name: str, values: Sequence[Any], outputs: Any,
                           input_attrs: Optional[Dict[int, str]] = None, unbacked: Optional[Dict[str, Any]] = None,
                           inputs_after: Optional[Sequence[torch.Tensor]] = None,
                           ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """An AOTAutograd graph (aot_inference_graph of a dynamo graph: symbolic with the ShapeEnv of
    its dynamic shapes, or static with `shape_env` None) with the values of the recorded call: `values` its inputs (tensors, and ints for its size inputs), `outputs`
    what it returned. The symbols take their values in this call; the graph keeps its size inputs
    and arithmetic, so it replays at any shape its ranges and guards allow. `unbacked`: the
    values its data-dependent symbols took in the call (unbacked_values). `inputs_after`: the tensor
    inputs as the call left them (live: only the written ones are copied); with it an input the
    graph writes (`aten.copy_` into it, as AOTAutograd keeps an inference graph's input mutations: a
    BatchNorm's running statistics in train mode) becomes an output `mutated/<key>` holding its new value, as the other lowerings
    record it; without it such a graph is refused (its write would go unjudged)."""
    from .serialize import _is_sym, symbolic_facts
    placeholders = [n for n in aten.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(values):
        raise CaptureError(f"the symbolic graph takes {len(placeholders)} inputs, the call gave {len(values)}")
    bindings: Dict[str, int] = {}
    for n, v in zip(placeholders, values):
        val = n.meta.get("val")
        if isinstance(v, torch.Tensor) and isinstance(val, torch.Tensor):
            for d, s in enumerate(val.shape):
                if _is_sym(s) and s.node.expr.is_Symbol:
                    bindings.setdefault(str(s.node.expr), int(v.shape[d]))
        elif _is_sym(val) and val.node.expr.is_Symbol and isinstance(v, (int, float, bool)):
            bindings.setdefault(str(val.node.expr), int(v))
    bindings.update(unbacked or {})
    facts = symbolic_facts(aten, shape_env, bindings) if shape_env is not None else None
    attr_keys: Dict[str, str] = {}
    inputs: Dict[str, str] = {}
    tensors: Dict[str, torch.Tensor] = {}
    position = 0
    for n, v in zip(placeholders, values):
        if not isinstance(v, torch.Tensor):
            continue  # a size input: bound from the symbols at replay
        key = (input_attrs or {}).get(position)
        if key is not None:
            attr_keys[n.name] = key
            tensors[key] = v
        else:
            inputs[n.name] = f"{name}/input/{n.name}"
            tensors[inputs[n.name]] = v
        position += 1
    tensor_placeholders = [n for n, v in zip(placeholders, values) if isinstance(v, torch.Tensor)]
    written = written_inputs(aten, tensor_placeholders)
    if written and inputs_after is None:  # kept in the graph, its new value would never be judged
        raise CaptureError(f"the graph writes its input {written[0][1].name}, whose value after the call this lowering "
                           f"does not have (a tensor subclass input's)")
    record_constants(aten, name, attr_keys, tensors)
    gjson = graph_to_json(aten, name, attr_keys, facts)
    # The graph returns what the call returned: its tensors and the numbers its nodes compute
    # (sizes, `.item()`); a constant it returns is no output of the graph.
    out_node = next(n for n in gjson["nodes"] if n["op"] == "output")
    out_fx = next(n for n in aten.graph.nodes if n.op == "output")
    returned = out_fx.args[0] if isinstance(out_fx.args[0], (list, tuple)) else [out_fx.args[0]]
    names, leaves = flatten_outputs(outputs)
    for position, ph in written:  # appended to the graph's outputs, in this order
        names.append(f"mutated/{attr_keys.get(ph.name) or inputs[ph.name]}")
        leaves.append(inputs_after[position].detach().to("cpu", copy=True))
    if len(returned) != len(leaves):
        raise CaptureError(f"the symbolic graph returns {len(returned)} values but the call returned {len(leaves)}")
    kept = [(r.name, n, v) for r, n, v in zip(returned, names, leaves)
            if isinstance(r, fx.Node) and isinstance(r.meta.get("val"), (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))]
    out_node["args"] = [[{"node": node} for node, _, _ in kept]]
    out_keys, out_names = [], []
    for k, (_, oname, value) in enumerate(kept):
        out_keys.append(f"{name}/output/{k}")
        out_names.append(oname)
        tensors[out_keys[-1]] = as_output(value)
    return gjson, _graph_entry(name, inputs, out_keys, out_names), tensors
