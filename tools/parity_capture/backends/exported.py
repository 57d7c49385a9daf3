"""torch.export of a repro dir's graph, shared by the backends that compile an exported program."""
from __future__ import annotations

import torch

def export(g, device: str):
    gm = g.module_on(device)
    inputs = tuple(x.to(device) for x in g.inputs())
    return torch.export.export(gm, inputs, strict=False), inputs
