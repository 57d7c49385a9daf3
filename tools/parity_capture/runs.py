"""A repro dir's graph as the worker's backend runs and the profiling child take it: the module
(parameters as nn.Parameters where a train run differentiates them), its inputs on a device, one
iteration of it as both time one, and results written back as safetensors for parity's C++ side
to read."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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



def device_tangents(g, device: str, train: bool) -> List[Optional[torch.Tensor]]:
    """The gradients g's program fed to its outputs (None where it fed none), on `device`; none in
    eval: what iteration() differentiates in train mode."""
    return [None if t is None else t.to(device) for t in g.tangents()] if train else []


def write_tensors(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    from .standalone_graph import save_tensors
    tmp = path + ".tmp"
    save_tensors(tmp, tensors)
    os.replace(tmp, path)


def iteration(fn, inputs, train: bool, tangents: Sequence = (), fresh_grads: Sequence = ()) -> Callable[[], Any]:
    """One iteration of fn on inputs, as a timed run takes it: the forward (under no_grad in
    eval), and in train mode its backward: of the gradients the program fed to the outputs (a dump
    of a real training step: `tangents`, None where it fed none; none where no such output needs
    a gradient), else of the loss (the first output, summed when not a scalar). In train mode the .grad of each of `fresh_grads` (the
    parameters, the inputs) is set to None first: a backward adds into the gradients it finds,
    which a run's results may hold."""
    if not train:
        def step():
            with torch.no_grad():
                return fn(*inputs)
        return step

    def step():
        for t in fresh_grads:
            if isinstance(t, torch.Tensor):
                t.grad = None
        out = fn(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if tangents:  # as standalone.train_results takes it: no backward where none applies
            pairs = [(o, t) for o, t in zip(outs, tangents)
                     if t is not None and isinstance(o, torch.Tensor) and o.requires_grad]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [t.to(o.device, o.dtype) for o, t in pairs])
        else:
            loss = outs[0]
            (loss if loss.numel() == 1 else loss.sum()).backward()
        return out
    return step
