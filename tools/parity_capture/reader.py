"""Reads repro dirs back as FX GraphModules (for the Python worker and users' scripts). The
graph reader itself is standalone.py's, shared with the standalone repro.py. Reading never
executes code from the repro dir: targets are resolved only among torch.ops and
operator.getitem."""
from __future__ import annotations

import json
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch
import torch.fx as fx
from safetensors.torch import load_file

from .standalone import FORMAT_VERSION, decode_arg, graph_from_json, resolve_target  # noqa: F401 (re-exported)


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
