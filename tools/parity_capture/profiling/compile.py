"""torch.compile as `parity verify` runs the backend (contract.inductor_settings), with the
settings profiling needs."""
from __future__ import annotations

import contextlib
from typing import Any, Dict

import torch

from ..contract import inductor_settings
from ..standalone import parse_option


def _inductor_patch(options: Dict[str, Any], extra: Dict[str, Any]):
    import torch._inductor.config as cfg
    patch = inductor_settings(options)
    patch.update(extra)
    return cfg.patch(patch)


def _compile(gm, backend: str, options: Dict[str, Any], profiling: bool):
    """torch.compile as `parity verify` runs the backend. For Inductor, profiling settings: the
    caches off (so code is generated, and provenance recorded, in this process), descriptive
    kernel names, a profiler record around each C++ kernel, provenance tracking on."""
    if backend == "inductor":
        extra = {"force_disable_caches": True, "triton.unique_kernel_names": True} if profiling else {}
        if profiling:
            extra["cpp.enable_kernel_profile"] = True
            extra["trace.provenance_tracking_level"] = 1
        compiled = torch.compile(gm, backend="inductor", fullgraph=True)
        return compiled, lambda: _inductor_patch(options, extra)
    kw = {"options": {k: parse_option(v) for k, v in options.items()}} if options else {}
    return torch.compile(gm, backend=backend, fullgraph=True, **kw), contextlib.nullcontext
