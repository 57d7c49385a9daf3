"""parity_capture: lower PyTorch programs to parity repro dirs (data only) and read them back.

    from parity_capture import capture, dump_backend, load_repro

    capture(model, (x,), "out/mlp")                              # torch.export (make_fx fallback)
    torch.compile(model, backend=dump_backend("out/prog"))(x)    # every dynamo graph, real inputs
    repro = load_repro("out/mlp"); repro.graphs[0].module(*repro.graphs[0].inputs())
"""
from .serialize import FORMAT_VERSION, graph_to_json, write_repro_dir
from .capture import capture
from .lowering import capture_graph_module
from .dynamo_backend import dump_backend
from .reader import load_repro, Repro, ReproGraph

__all__ = [
    "FORMAT_VERSION", "graph_to_json", "write_repro_dir", "capture", "capture_graph_module",
    "dump_backend", "load_repro", "Repro", "ReproGraph",
]
