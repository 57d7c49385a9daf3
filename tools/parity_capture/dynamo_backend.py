"""A torch.compile backend that records every dynamo graph of a real program, with its real
inputs, into one repro dir, and runs the graph eagerly so the program goes on unchanged:

    model = torch.compile(model, backend=dump_backend("out/prog"))
    loss = loss_fn(model(x), y); loss.backward()   # out/prog/ holds graph_0, graph_1, ...

Per graph, the manifest says what the program ran (docs/format.md): the floating dtype(s) of its
inputs and parameters, autocast, the device, and whether it ran with grad. A graph called with
grad-requiring inputs (a training step) is recorded with the gradient the program's backward fed
to its outputs, so `parity verify DIR` checks the outputs, the parameters' and inputs' gradients
as the suite's train mode does.

Recording never breaks the program: a graph that cannot be recorded (symbolic shapes, an op the
format cannot hold, a tracing error) is one warning naming the graph and the reason, runs
eagerly as if nothing happened, and is listed in the manifest's `skipped_graphs`.
"""
from __future__ import annotations

import atexit
import os
import sys
import weakref
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import backward_graph, compiled_autograd
from .lowered import snapshot_attrs
from .recording import ParityCaptureWarning, _CompileFacts, _Dump, _Graph, _reason, _recorded_outputs, _warn

__all__ = ["dump_backend", "ParityCaptureWarning"]  # the warning: programs filter by it


def _snapshot(args: List[Any]) -> List[Any]:
    """The input values before the call (a graph may update buffers in place), on the CPU."""
    with torch.no_grad():
        return [a.detach().to("cpu", copy=True) if isinstance(a, torch.Tensor) else a for a in args]


def _watch_backward(dump: _Dump, g: _Graph, outputs: Any) -> None:
    """Records the gradients the program's first backward through this call feeds to g's
    outputs. Watched on the outputs' autograd nodes (a pre-hook sees the gradient a node gets,
    the seed too): a tensor hook, and torch's multi-grad hook built on them, never fire for the
    tensor backward() is called on, and a program that calls `loss.backward()` on the loss its
    compiled code returned is exactly that. Outputs the engine will not reach get None; the
    gradients are handed over once every reached one has its own."""
    recorded = _recorded_outputs(g, outputs)
    watched = [recorded[k] for k in g.grad_outputs]
    nodes: Dict[Any, List[Tuple[int, int]]] = {}  # autograd node -> [(watched index, its output_nr)]
    for i, t in enumerate(watched):
        if t.grad_fn is not None:
            nodes.setdefault(t.grad_fn, []).append((i, t.output_nr))
    if not nodes:
        return
    state: Dict[str, Any] = {"grads": [None] * len(watched), "pending": None, "handles": []}

    def prehook_for(node):
        # The engine calls it from wherever backward() was called, often a compiled frame's
        # code, where dynamo would trace it (and this backend record parity's own code as the
        # program's graphs): never traced.
        @torch.compiler.disable
        def prehook(grad_outputs):
            if state["pending"] is None:  # the first node this backward reaches: which others it will
                # (the node running now is one, also when it is the root, which the engine does not list)
                state["pending"] = {n for n in nodes if n is node or torch._C._will_engine_execute_node(n)}
            if node not in state["pending"]:
                return None
            for i, nr in nodes[node]:
                state["grads"][i] = _as_placed(grad_outputs[nr], watched[i])
            state["pending"].discard(node)
            if not state["pending"]:
                for h in state["handles"]:
                    h.remove()  # the first backward through this call is the one recorded
                dump.add_tangents(g, list(state["grads"]))
            return None
        return prehook

    state["handles"] = [node.register_prehook(prehook_for(node)) for node in nodes]


def _as_placed(grad: Any, out: Any) -> Any:
    """The gradient fed to output `out`, placed as `out` is where it is a DTensor gradient of
    another placement: a replicated gradient of a sharded output becomes each rank's own chunk, a
    partial one is reduce-scattered. AOTAutograd moves a tangent so before the compiled backward
    runs (DTensor's __coerce_same_metadata_as_tangent__), and the recorded backward takes it so.
    A partial gradient's move is a collective: every rank makes it at the same point of its
    backward (the hook runs where the SPMD program's backward reaches this call), as recording
    the backward graph runs its forward's collectives (backward_graph.py). A move DTensor refuses
    (to a partial placement) leaves the gradient as it came."""
    from torch.distributed.tensor import DTensor, Replicate, Shard
    if not (isinstance(grad, DTensor) and isinstance(out, DTensor)) or grad.placements == out.placements:
        return grad
    if grad.device_mesh != out.device_mesh or not all(isinstance(p, (Replicate, Shard)) for p in out.placements):
        return grad
    try:  # inside the program's backward: never raise there
        with torch.no_grad():
            return grad.redistribute(out.device_mesh, out.placements)
    except Exception:
        return grad


def _joint_inputs(gm: torch.fx.GraphModule, args: List[Any], facts: _CompileFacts
                  ) -> Optional[Tuple[List[Any], List[Optional[str]]]]:
    """For a train call whose backward is recorded as a graph of its own (backward_graph.wanted):
    copies of its inputs before the call, on their devices and requiring grad as they do, and each
    one's name in the record (its parameter key, else `input/<placeholder>`); else None."""
    if not torch.is_grad_enabled() or not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return None
    if not backward_graph.wanted(gm, args):
        return None
    with torch.no_grad():
        copies = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    labels = [(facts.attr_keys[k] if k < len(facts.attr_keys) and facts.attr_keys[k] else f"input/{facts.placeholders[k]}")
              if isinstance(a, torch.Tensor) else None for k, a in enumerate(args)]
    return copies, labels


def dump_backend(out_dir: str, model_name: Optional[str] = None, max_graphs: Optional[int] = None, imports=(),
                 suite: Optional[str] = None):
    """A dynamo backend recording each graph's first call into the repro dir `out_dir`.
    `model_name`: the name records and `parity ci`'s baseline rows know the program by (default:
    `out_dir`'s own name, so programs captured into dirs of their own gate as rows of their own).
    `imports`: modules that register the program's non-ATen ops, when capture cannot find them.
    `suite`: the benchmark suite the program's model belongs to (huggingface, timm, torchbench):
    its tolerances apply and `parity ci` gates it against that suite's expected file, under
    `model_name` (default suite "repro")."""
    if model_name is None:
        model_name = os.path.basename(os.path.normpath(os.path.abspath(out_dir))) or "program"
    dump = _Dump(out_dir, model_name, max_graphs, imports, suite)

    def backend(gm: torch.fx.GraphModule, example_inputs: List[Any]):
        if dump.full():
            return gm
        # Compiled autograd's graphs are recorded with their list inputs flattened and their
        # gradient accumulation computed as values (compiled_autograd.py); the program runs its
        # own gm.
        call = compiled_autograd.RecordedCall.of(gm, example_inputs)
        recorded_gm = call.gm if call else gm
        recorded_args = call.args if call else list
        facts = _CompileFacts(recorded_gm, recorded_args(example_inputs))  # may restart dynamo's analysis: before a name is taken
        name = dump.next_name()
        if name is None:
            return gm
        state = {"recorded": False}

        def run(*args):
            if state["recorded"]:
                return gm(*args)
            state["recorded"] = True
            try:
                snapshot = _snapshot(recorded_args(args))
                attrs = snapshot_attrs(gm)  # an optimizer step writes the parameters and state it holds
                joint = _joint_inputs(recorded_gm, recorded_args(args), facts)
            except Exception as e:
                dump.skip(name, e)
                return gm(*args)
            outputs = gm(*args)  # the program's own call, exactly as without parity
            g = dump.record(name, recorded_gm, facts, recorded_args(args), snapshot, outputs, attrs)
            if g is not None and joint is not None:
                g.joint = (recorded_gm, *joint)
            if g is not None and g.grad_outputs:
                try:
                    _watch_backward(dump, g, outputs)
                except Exception as e:
                    _warn(f"parity dump_backend: {name}: cannot watch its backward ({_reason(e)}); recorded as eval")
            return outputs

        return run

    backend.dump = dump  # type: ignore[attr-defined]
    atexit.register(_say_if_no_graph_came, weakref.ref(dump))
    return backend


def _say_if_no_graph_came(ref: "weakref.ReferenceType[_Dump]") -> None:
    """At the program's exit: a backend that dynamo never handed a graph wrote nothing, and the
    user, who expects a repro dir, is told why there is none (dynamo ran the program eagerly:
    nothing to compile, or a graph break it could not handle, like a fused optimizer's step or
    an RNN module). A backend the program dropped before exit says nothing."""
    dump = ref()
    if dump is not None and dump.compiled == 0:
        sys.stderr.write(f"parity dump_backend: no graph reached this backend, so nothing was written to {dump.out_dir}: "
                         "dynamo ran the program eagerly (nothing to compile, or a graph break it could not handle; "
                         "TORCH_LOGS=graph_breaks says where)\n")
