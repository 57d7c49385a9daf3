"""Reads repro dirs back as FX GraphModules (for the Python worker and users' scripts). The
graph reader itself is standalone_graph.py's, shared with the standalone repro.py. Reading never
executes code from the repro dir: targets are resolved only among torch.ops and
operator.getitem."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch
import torch.fx as fx

from . import standalone
from .standalone import on_device
from .standalone_graph import FORMAT_VERSION, OLDEST_FORMAT_VERSION, graph_from_json, load_tensors, placeholder_values


@dataclass
class ReproGraph:
    name: str
    module: fx.GraphModule
    input_names: List[str]
    tensors: Dict[str, torch.Tensor] = field(repr=False)
    entry: Dict[str, Any] = field(repr=False)

    gjson: Dict[str, Any] = field(default_factory=dict, repr=False)

    def inputs(self) -> List[Any]:
        """The captured inputs, each in the layout it was captured in (and, for a symbolic graph,
        the sizes it takes, from the symbols those inputs bind)."""
        return placeholder_values(self.gjson, self.entry, self.tensors)

    def module_on(self, device: str) -> fx.GraphModule:
        """The graph module on `device`, its device arguments too (standalone.on_device)."""
        return on_device(self.module, device)

    def symbolic(self) -> bool:
        return bool(self.gjson.get("symbols"))

    def expected_outputs(self) -> List[torch.Tensor]:
        return [self.tensors[k] for k in self.entry.get("expected_outputs", [])]

    def tangents(self) -> List[Optional[torch.Tensor]]:
        """standalone.tangents of this graph."""
        return standalone.tangents(self.entry, self.tensors)

    def differentiates(self, name: str) -> bool:
        """standalone.differentiates of this graph."""
        return standalone.differentiates(self.entry, name)


@dataclass
class Repro:
    path: str
    manifest: Dict[str, Any]
    graphs: List[ReproGraph]
    tensors: Dict[str, torch.Tensor] = field(repr=False)


def load_repro(path: str, graph: Optional[str] = None, differentiated: bool = False) -> Repro:
    """The repro dir's graphs as modules. With `graph` (a name; the first graph when none has it),
    that graph only: a request runs one graph, and building the others' modules (each a pass over
    its JSON) was wasted on it. `differentiated`: the graph's floating parameters that its program
    differentiated are nn.Parameters (graph_from_json's `parameters`)."""
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    if not OLDEST_FORMAT_VERSION <= (manifest.get("version") or 0) <= FORMAT_VERSION:
        raise ValueError(f"{path}/manifest.json: version {manifest.get('version')} is not {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")
    tensors = load_tensors(os.path.join(path, manifest.get("tensors", "tensors.safetensors")))
    entries = manifest["graphs"]
    if graph is not None and entries:
        entries = [next((e for e in entries if e["name"] == graph), entries[0])]
    graphs = []
    for entry in entries:
        with open(os.path.join(path, entry["file"])) as f:
            gjson = json.load(f)
        params = (lambda name, entry=entry: standalone.differentiates(entry, name)) if differentiated else False
        gm = graph_from_json(gjson, tensors, parameters=params)
        placeholders = [n for n in gjson["nodes"] if n["op"] == "placeholder"]
        graphs.append(ReproGraph(entry["name"], gm, [n["name"] for n in placeholders], tensors, entry, gjson))
    return Repro(path, manifest, graphs, tensors)
