"""The Python side of experiment/backends/torchscript.cpp: a torch.jit.trace parity runs in C++."""
from __future__ import annotations

from typing import Any, Dict

import torch

from ..runs import load_graph


def torchscript(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    gm = g.module_on(device)
    inputs = tuple(x.to(device) for x in g.inputs())
    with torch.no_grad():
        traced = torch.jit.trace(gm, inputs, check_trace=False)
    traced.save(req["out"])
    return {"path": req["out"]}
