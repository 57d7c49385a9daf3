"""What every lowering writes, whatever it lowers: the producer's name, a graph's manifest entry,
outputs flattened to named leaves, and the attributes (parameters, buffers, constants) a graph
reads."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch
import torch.fx as fx
import torch.utils._pytree as pytree


PRODUCER = "parity_capture 0.1"


def _keystr(path) -> str:
    """('logits',) -> "logits"; (0, 'hidden') -> "0.hidden"; () -> "output"."""
    parts = []
    for k in path:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return ".".join(parts) or "output"


def flatten_outputs(out: Any) -> Tuple[List[str], List[Any]]:
    """Flattens a model output (tensors, tuples, dicts, HF ModelOutputs) to named leaves."""
    leaves, _ = pytree.tree_flatten_with_path(out)
    return [_keystr(p) for p, _ in leaves], [v for _, v in leaves]


def _graph_entry(name: str, inputs: Dict[str, str], outputs: List[str], output_names: List[str]) -> Dict[str, Any]:
    return {"name": name, "file": f"graphs/{name}.json", "inputs": inputs,
            "expected_outputs": outputs, "output_names": output_names}


def snapshot_attrs(gm: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """gm's parameters and buffers as they are now, copied to the CPU (before a call that may
    write them: a compiled optimizer step keeps the parameters and state it updates there)."""
    with torch.no_grad():
        return {k: v.detach().to("cpu", copy=True)
                for k, v in list(gm.named_parameters(remove_duplicate=False)) + list(gm.named_buffers(remove_duplicate=False))}


def record_constants(gm: fx.GraphModule, name: str, attr_keys: Dict[str, str], tensors: Dict[str, torch.Tensor]) -> None:
    """Tensors the traced code made from Python values (torch.tensor(...), a mask constant) are
    attributes of the traced module (get_attr nodes): recorded as graph `name`'s constants."""
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.name not in attr_keys:
            value = getattr(gm, n.target)
            if isinstance(value, torch.Tensor):
                attr_keys[n.name] = f"const/{name}/{n.target}"
                tensors[attr_keys[n.name]] = value.detach()


def written_inputs(gm: fx.GraphModule, user_placeholders: Sequence[fx.Node]) -> List[Tuple[int, fx.Node]]:
    """The user inputs a functionalized trace writes back (`aten.copy_(input, new value)`, what
    functionalize leaves for a mutated input, and AOTAutograd with keep_inference_input_mutations),
    as (position, placeholder); the graph made functional in place: each copy_ removed and its new
    value appended to the graph's outputs."""
    position = {ph: k for k, ph in enumerate(user_placeholders)}
    copies = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
              and n.args[0] in position and not n.users]
    if not copies:
        return []
    out = next(n for n in gm.graph.nodes if n.op == "output")
    values = list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    written = []
    for c in copies:
        values.append(c.args[1])
        written.append((position[c.args[0]], c.args[0]))
        gm.graph.erase_node(c)
    out.args = (values,)
    gm.recompile()
    return written
