"""Timing and memory of one step (runs.iteration: forward, and in train mode its backward): warm
iterations, peak memory as the dynamo runner reads it."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List

import torch


def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)



def _timed(step: Callable[[], Any], sync: Callable[[], None], n: int) -> List[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times



def _peak_memory(step: Callable[[], Any], device: str, sync: Callable[[], None]) -> int:
    """Peak bytes allocated during one step: the caching allocator's high-water mark on CUDA (as
    the dynamo runner reads it), the profiler's allocation events on the CPU."""
    if device.startswith("cuda"):
        sync()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        sync()
        return int(torch.cuda.max_memory_allocated() - base)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # Every allocation and free, in time order (FunctionEvents fold them into the ops).
    mem = sorted(((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"))
    live = peak = 0
    for _, nbytes in mem:
        live += nbytes
        peak = max(peak, live)
    return int(peak)



def _stats(times: List[float]) -> Dict[str, Any]:
    return {"times_ms": times, "median_ms": statistics.median(times) if times else None}
