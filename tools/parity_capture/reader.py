"""Rebuilds FX GraphModules from a repro dir (for the Python worker and standalone repro
scripts). Reading never executes code from the repro dir: targets are resolved only among
torch.ops and operator.getitem."""
from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch
import torch.fx as fx
from safetensors.torch import load_file

from .serialize import FORMAT_VERSION, GETITEM


def resolve_target(name: str):
    if name == GETITEM:
        return operator.getitem
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), op)
    return getattr(packet, overload or "default")


def decode_arg(a: Any, env: Dict[str, fx.Node]) -> Any:
    if isinstance(a, list):
        return [decode_arg(x, env) for x in a]
    if isinstance(a, dict):
        (tag, v), = a.items()
        if tag == "node":
            return env[v]
        if tag == "float":
            return float(v)
        if tag == "dtype":
            return getattr(torch, v)
        if tag == "device":
            return torch.device(v)
        if tag == "layout":
            return getattr(torch, v)
        if tag == "memory_format":
            return getattr(torch, v)
        raise ValueError(f"unknown tag {tag}")
    return a


def graph_from_json(gjson: Dict[str, Any], attrs: Dict[str, torch.Tensor], parameters: bool = False) -> fx.GraphModule:
    """Rebuilds a GraphModule. With `parameters`, floating get_attr tensors under "param/" become
    nn.Parameters (train mode), the rest buffers."""
    if gjson.get("version") != FORMAT_VERSION:
        raise ValueError(f"graph format version {gjson.get('version')} is not {FORMAT_VERSION}")
    root = torch.nn.Module()
    g = fx.Graph()
    env: Dict[str, fx.Node] = {}
    for n in gjson["nodes"]:
        op = n["op"]
        if op == "placeholder":
            node = g.placeholder(n["name"])
        elif op == "get_attr":
            attr = "_attr_" + "".join(c if c.isalnum() else "_" for c in n["target"])
            if not hasattr(root, attr):
                t = attrs[n["target"]]
                if parameters and n["target"].startswith("param/") and t.is_floating_point():
                    root.register_parameter(attr, torch.nn.Parameter(t.detach().clone()))
                else:
                    root.register_buffer(attr, t)
            node = g.get_attr(attr)
            node.meta["parity_target"] = n["target"]
        elif op == "call_function":
            args = tuple(decode_arg(a, env) for a in n.get("args", []))
            kwargs = {k: decode_arg(v, env) for k, v in n.get("kwargs", {}).items()}
            node = g.call_function(resolve_target(n["target"]), args, kwargs)
        elif op == "output":
            node = g.output(tuple(decode_arg(a, env) for a in n["args"][0]))
        else:
            raise ValueError(f"unknown op {op}")
        node.name = n["name"]
        meta = n.get("meta", {})
        if "stack_trace" in meta:
            node.meta["stack_trace"] = meta["stack_trace"]
        env[n["name"]] = node
    g.lint()
    return fx.GraphModule(root, g)


@dataclass
class ReproGraph:
    name: str
    module: fx.GraphModule
    input_names: List[str]
    tensors: Dict[str, torch.Tensor] = field(repr=False)
    entry: Dict[str, Any] = field(repr=False)

    def inputs(self) -> List[torch.Tensor]:
        return [self.tensors[self.entry["inputs"][n]] for n in self.input_names]

    def expected_outputs(self) -> List[torch.Tensor]:
        return [self.tensors[k] for k in self.entry.get("expected_outputs", [])]


@dataclass
class Repro:
    path: str
    manifest: Dict[str, Any]
    graphs: List[ReproGraph]
    tensors: Dict[str, torch.Tensor] = field(repr=False)


def load_repro(path: str) -> Repro:
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}/manifest.json: version {manifest.get('version')} is not {FORMAT_VERSION}")
    tensors = load_file(os.path.join(path, manifest.get("tensors", "tensors.safetensors")))
    graphs = []
    for entry in manifest["graphs"]:
        with open(os.path.join(path, entry["file"])) as f:
            gjson = json.load(f)
        gm = graph_from_json(gjson, tensors)
        names = [n["name"] for n in gjson["nodes"] if n["op"] == "placeholder"]
        graphs.append(ReproGraph(entry["name"], gm, names, tensors, entry))
    return Repro(path, manifest, graphs, tensors)
