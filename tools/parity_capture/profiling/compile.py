"""torch.compile as `parity verify` runs the backend (contract.inductor_settings), with the
settings profiling needs."""
from __future__ import annotations

import contextlib
from typing import Any, Dict

import torch

from ..contract import inductor_settings
from ..standalone import parse_option


@contextlib.contextmanager
def _inductor_patch(options: Dict[str, Any], extra: Dict[str, Any], profiling: bool = False):
    import torch._functorch.config as aot_cfg
    import torch._inductor.config as cfg
    patch = inductor_settings(options)
    patch.update(extra)
    # The graph-level caches off (a hit would skip code generation and provenance); the compiled
    # kernels' cache stays on: it is keyed by each kernel's source, so a hit is the same binary
    # a fresh build gives (force_disable_caches rebuilt every kernel on every profile).
    aot = {"enable_autograd_cache": False} if profiling else {}
    with cfg.patch(patch), aot_cfg.patch(aot):
        yield


def _compile(gm, backend: str, options: Dict[str, Any], profiling: bool):
    """torch.compile as `parity verify` runs the backend. For Inductor, profiling settings: the
    graph caches off (so code is generated, and provenance recorded, in this process), descriptive
    kernel names, a profiler record around each C++ kernel, provenance tracking on."""
    if backend == "inductor":
        extra = {"fx_graph_cache": False, "fx_graph_remote_cache": False,
                 "triton.unique_kernel_names": True} if profiling else {}
        if profiling:
            extra["cpp.enable_kernel_profile"] = True
            extra["trace.provenance_tracking_level"] = 1
        compiled = torch.compile(gm, backend="inductor", fullgraph=True)
        return compiled, lambda: _inductor_patch(options, extra, profiling)
    kw = {"options": {k: parse_option(v) for k, v in options.items()}} if options else {}
    return torch.compile(gm, backend=backend, fullgraph=True, **kw), contextlib.nullcontext
