"""Reads repro dirs back as FX GraphModules (for the Python worker and users' scripts). The
graph reader itself is standalone.py's, shared with the standalone repro.py. Reading never
executes code from the repro dir: targets are resolved only among torch.ops and
operator.getitem."""
from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch
import torch.fx as fx
from safetensors.torch import load_file

from .standalone import FORMAT_VERSION, captured_layout, decode_arg, graph_from_json, resolve_target  # noqa: F401 (re-exported)


@dataclass
class ReproGraph:
    name: str
    module: fx.GraphModule
    input_names: List[str]
    tensors: Dict[str, torch.Tensor] = field(repr=False)
    entry: Dict[str, Any] = field(repr=False)

    placeholders: List[Dict[str, Any]] = field(default_factory=list, repr=False)  # their JSON nodes

    def inputs(self) -> List[torch.Tensor]:
        """The captured inputs, each in the layout it was captured in."""
        nodes = self.placeholders or [{} for _ in self.input_names]
        return [captured_layout(self.tensors[self.entry["inputs"][n]], node) for n, node in zip(self.input_names, nodes)]

    def expected_outputs(self) -> List[torch.Tensor]:
        return [self.tensors[k] for k in self.entry.get("expected_outputs", [])]

    def tangents(self) -> List[Optional[torch.Tensor]]:
        """The gradients the program's backward fed to the outputs (train captures of real
        programs; docs/format.md); [] when the graph's first output is a loss."""
        return [None if k is None else self.tensors[k] for k in self.entry.get("tangents", [])]

    def differentiates(self, name: str) -> bool:
        """Whether a train run differentiates an input (placeholder name) or parameter (key)."""
        wanted = self.entry.get("requires_grad")
        return wanted is None or name in wanted


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
        placeholders = [n for n in gjson["nodes"] if n["op"] == "placeholder"]
        graphs.append(ReproGraph(entry["name"], gm, [n["name"] for n in placeholders], tensors, entry, placeholders))
    return Repro(path, manifest, graphs, tensors)
