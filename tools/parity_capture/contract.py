"""What parity's C++ side and its Python side must agree on, in one place each side reads.

- Accuracy runs of a backend compile with `inductor_settings` (Inductor's options plus
  fallback_random, so random ops draw eager's numbers): the worker's backend runs, the profiling
  child and the standalone repro.py all use it (defined in standalone.py, which repro.py inlines).
- A train run reports `train_results` (names and order), the same list parity's C++ reference
  builds (experiment/reference.cpp), defined in standalone.py so repro.py reports it too. The SGD
  learning rate and the seed come with each request from the C++ side (experiment/reference.h
  kSgdLr, the seed of ReferenceOptions), so they are defined once; standalone_graph.py's SGD_LR and
  SEED are the defaults for scripts that run without parity.
tests/python/test_contract.py checks both sides report the same results.
"""
from __future__ import annotations

from typing import Dict, List

import torch

from . import standalone
from .standalone import inductor_settings
from .standalone_graph import SEED, SGD_LR

# The rules both sides share, each defined once in what repro.py inlines and re-exported here.
__all__ = ["SEED", "SGD_LR", "inductor_settings", "train_results"]


def train_results(gm: torch.fx.GraphModule, g, out, inputs: List[torch.Tensor], sgd_lr: float = SGD_LR
                  ) -> Dict[str, torch.Tensor]:
    """What a train run reports (standalone.train_results, the one definition repro.py inlines),
    for the graph `g` of a repro dir (reader.Graph)."""
    return standalone.train_results(gm, g.tangents(), g.input_names, out, inputs, sgd_lr)
