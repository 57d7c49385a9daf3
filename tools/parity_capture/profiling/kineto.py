"""The profiler: one profiled run and what its events say: per-kernel device time (CUDA) or self
CPU time, the op that owns each kernel (extern calls own the ATen ops and library kernels inside
them), each row's phase, category and graph nodes."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

import torch

from .categories import _GRAPH_PREFIX, _RUNTIME_API, is_matmul_conv
from .provenance import Provenance


def _activities(device: str):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts



def _profile(step, device, sync, iterations, trace_path=None):
    """`iterations` profiled steps after one profiler warm-up step (its start-up cost is not the
    model's). Returns (events, wall_ms): wall_ms is one profiled step's wall time, the profiler's
    recording overhead included, its result processing not."""
    done = []

    def ready(p):
        if trace_path:
            p.export_chrome_trace(trace_path)
        done.append(p.events())

    schedule = torch.profiler.schedule(wait=0, warmup=1, active=iterations, repeat=1)
    wall = 0.0
    with torch.profiler.profile(activities=_activities(device), schedule=schedule, on_trace_ready=ready) as prof:
        for i in range(iterations + 1):
            t0 = time.perf_counter()
            step()
            sync()
            if i > 0:
                wall += time.perf_counter() - t0
            prof.step()
    return done[0], wall * 1e3 / iterations



def event_phase(e) -> str:
    """"backward" for an event the autograd engine ran (under an
    `autograd::engine::evaluate_function: ...` record), else "forward"."""
    x = e
    while x is not None:
        if x.name.startswith("autograd::engine::evaluate_function"):
            return "backward"
        x = x.cpu_parent
    return "forward"



def _launcher(e):
    """The op an event's device kernels belong to (past runtime API events)."""
    while e.name.startswith(_RUNTIME_API) and e.cpu_parent is not None:
        e = e.cpu_parent
    return e



def _owner(e, known, phase):
    """The row an event's time belongs to: its outermost ancestor (or itself) that is a kernel of
    the compiled module (`known`: the call the module makes, e.g. aten::convolution, not the
    aten::cudnn_convolution inside it), so the ATen ops and runtime calls inside an extern
    kernel count for it; else the event itself, past runtime API events."""
    found, x = None, e
    while known is not None and x is not None:
        if known(x.name, phase):
            found = x
        x = x.cpu_parent
    return found if found is not None else _launcher(e)



def profile_rows(events, device: str, iterations: int,
                 known: Optional[Callable[[str, str], bool]] = None) -> Dict[str, Any]:
    """Rows of a profile: time per iteration (device time of the kernels launched under the row's
    op on CUDA, self CPU time on the CPU), calls per iteration (kernel launches on CUDA), the
    device kernels, the phase (forward or backward: a train step's two compiled modules may name
    kernels alike, so rows are per phase). Self times partition the total, so the rows sum to
    the profiled time; on CUDA that total is the device's busy time (kernels, as Inductor's
    report counts it)."""
    from torch.autograd import DeviceType
    cuda = device.startswith("cuda")
    rows: Dict[tuple, Dict[str, Any]] = {}

    def row_of(name, phase):
        return rows.setdefault((phase, name), {"name": name, "phase": phase, "time_us": 0.0, "calls": 0, "device_kernels": []})

    for e in events:
        if e.device_type != DeviceType.CPU or e.name == "[memory]":
            continue
        if cuda and not e.kernels:
            continue
        phase = event_phase(e)
        owner = _owner(e, known, phase)
        if cuda:
            row = row_of(owner.name, phase)
            row["time_us"] += sum(k.duration for k in e.kernels)
            row["calls"] += len(e.kernels)
            for k in e.kernels:
                if k.name not in row["device_kernels"]:
                    row["device_kernels"].append(k.name)
        else:
            us = e.self_cpu_time_total
            if us > 0 or owner is e:
                row = row_of(owner.name, phase)
                row["time_us"] += us
                row["calls"] += 1 if owner is e else 0
    rows = {k: r for k, r in rows.items() if r["time_us"] > 0}
    for row in rows.values():
        row["time_us"] /= iterations
        row["calls"] = row["calls"] / iterations
    out = sorted(rows.values(), key=lambda r: -r["time_us"])
    return {"rows": out, "device_busy_us": sum(r["time_us"] for r in out) if cuda else None}



def classify(rows, kernels: Dict[str, Dict[str, str]], provenance: Provenance) -> None:
    """Adds category, kernel (the generated kernel or ATen call it is) and nodes to each row, from
    the kernels and provenance of the row's phase. An ATen op the compiled module calls (an
    extern kernel or a fallback) is a kernel when provenance names it: "extern" for matmul,
    convolution and attention, else "other"."""
    for row in rows:
        phase = row.get("phase", "forward")
        key = _GRAPH_PREFIX.sub("", row["name"])
        pkey = provenance.lookup(row["name"], phase)
        if key in kernels[phase]:
            row["category"], row["kernel"] = kernels[phase][key], key
        elif pkey or is_matmul_conv(row["name"]):
            row["category"] = "extern" if is_matmul_conv(row["name"]) else "other"
            row["kernel"] = row["name"]
        else:
            row["category"], row["kernel"] = "other", None
        row.update(provenance.nodes(pkey, phase) if pkey else {"post_grad_nodes": [], "nodes": []})
