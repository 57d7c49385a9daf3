"""A train graph's backward recorded as a graph of its own, where a replay cannot differentiate the
recorded forward as the program did: its inputs are tensor subclasses (DTensor: tensor
parallelism), whose autograd runs the collectives' backward outside the desugared forward, or it
calls collectives, whose backward (another collective) parity's interpreter does not run.

AOTAutograd traces the dynamo graph's joint forward and backward as it does for a backend, and its
partitioner splits them (`default_partition`). The forward part runs here on the recorded inputs
(their local tensors; its collectives run for real, every rank at the same point of its own
backward) to get the values the backward saves; the backward part then runs on those and the
gradients the program fed to the graph's outputs. The backward graph is recorded with those
inputs and the gradients it returned: each input's gradient an output `grad/<input>`, judged like
any other graph's outputs (a world's replay runs it on every rank, its collectives included).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import fx

from .distributed import is_collective
from .errors import CaptureError
from .lowering import desugared, without_opaque_inputs
from .symbolic_lowering import capture_symbolic_graph


def wanted(gm: fx.GraphModule, args: Sequence[Any]) -> bool:
    """Whether a train call of dynamo's graph `gm` with `args` (grad on, some input requiring it)
    has its backward recorded as a graph of its own: it takes a tensor subclass (DTensor), it
    calls a collective (a functional collective with an autograd formula: a hand-written
    sequence-parallel block's all_gather, whose backward is a reduce_scatter), or it calls a
    custom autograd.Function (dynamo's `autograd_function_apply`: a straight-through estimator's
    backward passes the gradient through a `round` whose derivative is zero). Each way autograd
    runs a backward that differentiating the recorded forward in a replay would not."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    if any(isinstance(a, torch.Tensor) and is_traceable_wrapper_subclass(a) for a in args):
        return True
    return any(n.op == "call_function" and (_calls_collective(n.target) or _custom_function(n.target)) for n in gm.graph.nodes)


def _custom_function(target: Any) -> bool:
    """Whether `target` is dynamo's call of a custom autograd.Function (its forward and backward
    traced as subgraphs)."""
    apply = getattr(torch.ops.higher_order, "autograd_function_apply", None)
    return apply is not None and target is apply


def _calls_collective(target: Any) -> bool:
    if isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name
    elif isinstance(target, torch._ops.OpOverload):
        name = target._schema.name
    else:
        return False
    return is_collective(name) or name.startswith("_c10d_functional_autograd::")


def partitioned(gm: fx.GraphModule, inputs: Sequence[Any]) -> Tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd's forward and backward graphs of `gm` called with `inputs` (real values, the
    ones requiring grad as the program's did), traced on fake copies: nothing runs."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import default_partition
    parts: Dict[str, fx.GraphModule] = {}

    def partition(joint, joint_inputs, **kwargs):
        parts["fw"], parts["bw"] = default_partition(joint, joint_inputs, **kwargs)
        return parts["fw"], parts["bw"]

    with torch.enable_grad():
        aot_module_simplified(gm, list(inputs), fw_compiler=lambda g, _: g, bw_compiler=lambda g, _: g,
                              partition_fn=partition)
    if "bw" not in parts:
        raise CaptureError("AOTAutograd traced no backward for it")
    return parts["fw"], parts["bw"]


def _outputs(g: fx.GraphModule) -> List[Any]:
    out = next(n for n in g.graph.nodes if n.op == "output")
    return list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]


def backward_inputs(fw: fx.GraphModule, bw: fx.GraphModule, flat_inputs: Sequence[Any],
                    tangents: Sequence[torch.Tensor]) -> List[Any]:
    """The backward graph's inputs: the values it saves, by name, from a run of the forward graph
    on `flat_inputs` (the program's inputs desugared), and `tangents` for its `tangents_*`."""
    with torch.no_grad():
        fw_values = fw(*[x.detach() if isinstance(x, torch.Tensor) else x for x in flat_inputs])
    by_name = {n.name: v for n, v in zip(_outputs(fw), fw_values) if isinstance(n, fx.Node)}
    placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    slots = [n for n in placeholders if n.name.startswith("tangents")]
    if len(slots) != len(tangents):
        raise CaptureError(f"its backward takes {len(slots)} output gradients, the program fed {len(tangents)}")
    fed = iter(tangents)
    values = []
    for n in placeholders:
        if n.name.startswith("tangents"):
            values.append(next(fed))
        elif n.name in by_name:
            values.append(by_name[n.name])
        else:
            raise CaptureError(f"its backward reads {n.name}, which its forward does not save")
    return values


def _tangents(bw: fx.GraphModule, grads: Sequence[Any]) -> List[torch.Tensor]:
    """The backward's output gradients: the program's, desugared as AOTAutograd's slots take them
    (a DTensor's local tensor and, where this torch flattens it so, its mesh), and where none
    flowed to an output (None: the loss does not reach it) zeros shaped as the backward's slot for
    it, as autograd materializes them for AOTAutograd's backward. When the counts differ, the fed
    ones (backward_inputs says what is wrong)."""
    slots = [n for n in bw.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")]
    per_output = [desugared([g]) if g is not None else [None] for g in grads]
    flat = [t.detach() if isinstance(t, torch.Tensor) else t for pieces in per_output for t in pieces]
    if len(flat) != len(slots) or all(t is not None for t in flat):
        return [t for t in flat if t is not None]
    device = next((t.device for t in flat if isinstance(t, torch.Tensor)), torch.device("cpu"))
    out = []
    for t, slot in zip(flat, slots):
        if t is None:
            meta = slot.meta.get("val")
            if not isinstance(meta, torch.Tensor) or not all(isinstance(d, int) for d in meta.shape):
                raise CaptureError(f"no gradient flowed to the output of its backward's {slot.name}, and its slot "
                                   "has no static shape to make zeros of")
            t = torch.zeros(meta.shape, dtype=meta.dtype, device=device)
        out.append(t)
    return out


def gradient_names(args: Sequence[Any], labels: Sequence[Optional[str]], returned: int) -> List[Optional[str]]:
    """Per gradient the backward returns: `grad/<label>` for the first tensor each input of `args`
    desugars to (its gradient there is the input's own, or its local shard's), else None. An input
    that does not require grad has one slot (its None) where AOTAutograd returns it so, else one
    per piece it desugars to; which of the two, the count the backward returned says."""
    def names_of(one_for_none: bool) -> List[Optional[str]]:
        names: List[Optional[str]] = []
        for a, label in zip(args, labels):
            if one_for_none and not (isinstance(a, torch.Tensor) and a.requires_grad):
                names.append(None)
                continue
            pieces = desugared([a])
            first = next((k for k, p in enumerate(pieces) if isinstance(p, torch.Tensor)), None)
            names.extend(f"grad/{label}" if k == first and label else None for k in range(len(pieces)))
        return names
    every_piece = names_of(False)
    return every_piece if len(every_piece) == returned else names_of(True)


def record(name: str, gm: fx.GraphModule, args: Sequence[Any], labels: Sequence[Optional[str]],
           grads: Sequence[Any]) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """The backward graph `name` of the call of `gm` with `args` (copies of the program's inputs
    before the call, requiring grad as they did; `labels` each input's name in the forward
    graph's record, or None), given the gradients `grads` the program fed to the outputs that
    required grad: (graph_json, manifest_entry, tensors) for write_repro_dir."""
    fw, bw = partitioned(gm, args)
    flat = desugared(list(args))
    values = backward_inputs(fw, bw, flat, _tangents(bw, grads))
    with torch.no_grad():
        returned = list(bw(*values))
    names = gradient_names(args, labels, len(returned))
    if len(names) != len(returned):
        raise CaptureError(f"its backward returns {len(returned)} gradients for {len(names)} inputs")
    # The gradients of inputs the program differentiated, each once; what else the partition
    # returns (None, the mesh handed through) is dropped, and the placeholders only it read with it.
    out = next(n for n in bw.graph.nodes if n.op == "output")
    kept, kept_names, kept_values = [], [], []
    for node, label, value in zip(_outputs(bw), names, returned):
        if label and isinstance(value, torch.Tensor) and label not in kept_names:
            kept.append(node)
            kept_names.append(label)
            kept_values.append(value.detach().to("cpu", copy=True))
    if not kept:
        raise CaptureError("its backward returns no gradient of a differentiated input")
    out.args = (tuple(kept),)
    bw.graph.eliminate_dead_code()
    bw.recompile()
    bw, values, _ = without_opaque_inputs(bw, values)
    cpu = [v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v for v in values]
    gjson, entry, tensors = capture_symbolic_graph(bw, None, name, cpu, kept_values)
    entry["output_names"] = kept_names
    return gjson, entry, tensors
