"""What parity's C++ side and its Python side must agree on, in one place each side reads.

- Accuracy runs of a backend compile with `inductor_settings` (Inductor's options plus
  fallback_random, so random ops draw eager's numbers): the worker's backend runs, the profiling
  child and the standalone repro.py all use it (defined in standalone.py, which repro.py inlines).
- A train run reports `train_results` (names and order), the same list parity's C++ reference
  builds (verifier/reference.cpp). The SGD learning rate and the seed come with each request
  from the C++ side (verifier/reference.h kSgdLr, the seed of ReferenceOptions), so they are
  defined once; the defaults here are for scripts that run without parity.
tests/python/test_contract.py checks both sides report the same results.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from .standalone import as_output, inductor_settings  # noqa: F401 (the one definition, shared with repro.py)

SGD_LR = 0.01  # verifier/reference.h kSgdLr, sent as "sgd_lr" in each run request
SEED = 1337    # verifier/reference.h ReferenceOptions::seed, sent as "seed"


def _attr_keys(gm: torch.fx.GraphModule) -> Dict[str, str]:
    """Module attribute -> tensor key in the repro dir, for every get_attr."""
    return {n.target: n.meta["parity_target"] for n in gm.graph.nodes if n.op == "get_attr" and "parity_target" in n.meta}


def train_results(gm: torch.fx.GraphModule, g, out, inputs: List[torch.Tensor], sgd_lr: float = SGD_LR
                  ) -> Dict[str, torch.Tensor]:
    """What a train run reports, in order: the loss (or, for a graph captured with the gradients
    its program fed to its outputs, every output, and the backward of those gradients), the
    gradients of the parameters and of the floating inputs it differentiates (None -> zeros),
    the parameters after one SGD step."""
    res: Dict[str, torch.Tensor] = {}
    tangents: List[Optional[torch.Tensor]] = g.tangents()
    if tangents:
        roots, grads = [], []
        for k, (o, t) in enumerate(zip(out, tangents)):
            res[f"output/{k}"] = as_output(o).detach()
            if t is not None and isinstance(o, torch.Tensor) and o.requires_grad:
                roots.append(o)
                grads.append(t.to(o.device, o.dtype))
        if roots:
            torch.autograd.backward(roots, grads)
    else:
        loss = out[0]
        loss.backward()
        res["loss"] = loss.detach()
    keys = _attr_keys(gm)
    params = list(gm.named_parameters())
    grad = lambda t: (t.grad if t.grad is not None else torch.zeros_like(t)).detach()
    for attr, p in params:
        res[f"grad/{keys[attr]}"] = grad(p)
    for name, x in zip(g.input_names, inputs):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            res[f"grad/input/{name}"] = grad(x)
    with torch.no_grad():
        for attr, p in params:
            res[f"sgd/{keys[attr]}"] = (p - sgd_lr * grad(p)).detach()
    return res
