"""The Python side of experiment/backends/nativert.cpp: the torch.export .pt2 NativeRT runs."""
from __future__ import annotations

from typing import Any, Dict

import torch

from ..runs import load_graph
from .exported import export


def export_pt2(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    ep, _ = export(g, req.get("device", "cpu"))
    torch.export.save(ep, req["out"])
    return {"path": req["out"]}
