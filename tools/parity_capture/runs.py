"""A repro dir's graph as the worker's backend runs and the profiling child take it: the module
(parameters as nn.Parameters where a train run differentiates them), its inputs on a device, and
results written back as safetensors for parity's C++ side to read."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import torch


def load_graph(req) -> Tuple[Any, Any]:
    """(repro, graph) of a request's "repro" and "graph" (default: the first graph), only that
    graph read; in train mode the graph's floating parameters that its program differentiated are
    nn.Parameters."""
    from .reader import load_repro
    repro = load_repro(req["repro"], graph=req.get("graph") or "", differentiated=req.get("mode") == "train")
    return repro, repro.graphs[0]


def device_inputs(g, device: str, train: bool) -> List[torch.Tensor]:
    from .standalone_graph import differentiable
    xs = []
    for name, t in zip(g.input_names, g.inputs()):
        if not isinstance(t, torch.Tensor):  # a size of a symbolic graph
            xs.append(t)
            continue
        t = t.to(device)
        if train and differentiable(t) and g.differentiates(name):
            t = t.detach().clone().requires_grad_(True)
        xs.append(t)
    return xs



def write_tensors(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    from .standalone_graph import save_tensors
    tmp = path + ".tmp"
    save_tensors(tmp, tensors)
    os.replace(tmp, path)
