"""A torch.compile backend that dumps every dynamo graph of a real program, with its real inputs,
into one repro dir, then runs the graph eagerly so the program goes on unchanged:

    model = torch.compile(model, backend=dump_backend("out/prog"))
    model(x)   # out/prog/ now holds graph_0, graph_1, ... (one per graph break)
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

import torch

from .capture import PRODUCER, capture_graph_module
from .host_ops import describe_graphs
from .serialize import write_repro_dir


class _Dump:
    def __init__(self, out_dir: str, model_name: str, max_graphs: Optional[int], imports=()):
        self.out_dir = out_dir
        self.imports = list(imports)
        self.model_name = model_name
        self.max_graphs = max_graphs
        self.graphs: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
        self.tensors: Dict[str, torch.Tensor] = {}
        self.lock = threading.Lock()

    def record(self, gm: torch.fx.GraphModule, inputs: List[Any]) -> None:
        with self.lock:
            if self.max_graphs is not None and len(self.graphs) >= self.max_graphs:
                return
            name = f"graph_{len(self.graphs)}"
            gjson, entry, tensors = capture_graph_module(gm, inputs, name)
            self.graphs.append((gjson, entry))
            self.tensors.update(tensors)
            manifest = {"torch_version": torch.__version__, "producer": PRODUCER + " (dynamo)",
                        "model": self.model_name, "mode": "eval", "dtype": "float32", "device": "cpu"}
            host = describe_graphs([g for g, _ in self.graphs], self.imports)
            if host:
                manifest["host_ops"] = host
            # Rewritten after every graph: a program that crashes later still leaves a valid dir.
            write_repro_dir(self.out_dir, manifest, self.graphs, self.tensors)


def dump_backend(out_dir: str, model_name: str = "program", max_graphs: Optional[int] = None, imports=()):
    """`imports`: modules that register the program's non-ATen ops, when capture cannot find them."""
    dump = _Dump(out_dir, model_name, max_graphs, imports)

    def backend(gm: torch.fx.GraphModule, example_inputs: List[Any]):
        recorded = [False]

        def run(*args):
            if not recorded[0]:
                recorded[0] = True
                dump.record(gm, list(args))  # the real inputs of the first call
            return gm(*args)

        return run

    backend.dump = dump  # type: ignore[attr-defined]
    return backend
