"""The Python side of experiment/backends/aot_inductor.cpp: the AOTInductor package parity loads in C++."""
from __future__ import annotations

import os
import time
from typing import Any, Dict

import torch

from ..contract import inductor_settings
from ..runs import load_graph
from .exported import export


def aot_inductor(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    os.makedirs(os.path.dirname(req["out"]) or ".", exist_ok=True)
    t0 = time.perf_counter()
    import torch._inductor.config as cfg
    with cfg.patch(inductor_settings(req.get("options", {}))):
        ep, _ = export(g, device)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=req["out"])
    return {"package": path, "compile_time_s": time.perf_counter() - t0}
