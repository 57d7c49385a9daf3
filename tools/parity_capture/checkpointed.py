"""Activation checkpointing, kept as the checkpoint call it is through the lowering to ATen.

Dynamo records `torch.utils.checkpoint(fn, ...)` as `tag_activation_checkpoint(body, *operands)`,
a higher-order op whose body is a graph module. No lowering keeps it: torch.export fails on it
(the body carries no checkpoint context), AOTAutograd and make_fx trace through it (its autograd
implementation runs the checkpoint inline, tagging the nodes for the partitioner only when it
traces a joint graph). The recorded graph would then hold the block's ops inlined, and a
backend replaying it would never see which values the program asked it to recompute.

`as_marked_calls` gives a copy of a dynamo graph whose checkpoint calls are
`invoke_subgraph(body, "<MARK><k>", *operands)`, a higher-order op every lowering keeps as a call
with its body lowered to ATen (under autocast too); `restore` turns each marked call of the
lowered graph back into `tag_activation_checkpoint(body, *operands)`. A backend replaying the
recorded graph differentiates that call as the program's compile did: AOTAutograd tags the body's
nodes for recomputation and its partitioner recomputes them in the backward.

A selective checkpoint's policy (`context_fn`) is Python, not data: such a block is recorded as
a plain checkpoint (every value recomputed), and `selective_policies` says which graph had one."""
from __future__ import annotations

from typing import List

import torch
import torch.fx as fx

MARK = "parity_checkpoint_"  # the invoke_subgraph identifier of a checkpoint call in flight


def _hop():
    return getattr(torch.ops.higher_order, "tag_activation_checkpoint", None)


def _subgraph_modules(gm: fx.GraphModule):
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            value = getattr(gm, str(n.target), None)
            if isinstance(value, fx.GraphModule):
                yield n.target, value


def has_checkpoints(gm: fx.GraphModule) -> bool:
    """Whether gm or any of its subgraphs calls tag_activation_checkpoint."""
    hop = _hop()
    if hop is None:
        return False
    if any(n.op == "call_function" and n.target is hop for n in gm.graph.nodes):
        return True
    return any(has_checkpoints(sub) for _, sub in _subgraph_modules(gm))


def selective_policies(gm: fx.GraphModule) -> List[str]:
    """The bodies of gm's checkpoint calls (at any depth) that carry a selective checkpoint
    policy (a `context_fn` given to torch.utils.checkpoint): recorded as plain checkpoints."""
    hop, found = _hop(), []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is hop and isinstance(n.args[0], fx.Node):
            body = getattr(gm, str(n.args[0].target))
            if body.meta.get("_checkpoint_context_fn") is not None:
                found.append(str(n.args[0].target))
    for _, sub in _subgraph_modules(gm):
        found += selective_policies(sub)
    return found


def as_marked_calls(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of gm (and of the subgraphs on the way to a checkpoint call) whose checkpoint calls
    are marked invoke_subgraph calls; gm itself when it has none. The program's own graph module,
    which the program keeps running, is never touched."""
    counter = [0]

    def mark(n: fx.Node) -> None:
        # Its kwargs are checkpoint's own options (use_reentrant, preserve_rng_state): the
        # traced call always runs non-reentrant, and a replay's does too.
        n.target = torch.ops.higher_order.invoke_subgraph
        n.args = (n.args[0], f"{MARK}{counter[0]}", *n.args[1:])
        n.kwargs = {}
        counter[0] += 1
    return _rewritten(gm, mark) if has_checkpoints(gm) else gm


def checkpoint_as_eager(body, *operands):
    """A checkpoint call run as a program's eager runs torch.utils.checkpoint: non-reentrant,
    every value of the body recomputed in the backward."""
    from torch.utils.checkpoint import checkpoint
    return checkpoint(body, *operands, use_reentrant=False)


def as_eager_calls(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of gm (and of the subgraphs on the way to a checkpoint call) whose checkpoint calls
    call checkpoint_as_eager, for an eager run to time; gm itself when it has none. torch's own
    eager of tag_activation_checkpoint runs the body under a selective-checkpoint dispatch mode
    whose policy always recomputes, a Python dispatch of every op of the body that the program's
    eager never paid. The recorded graph holds no selective policy (see the module's doc), so
    every call is a plain checkpoint. gm itself, which a backend compiles, is not touched."""
    def plain(n: fx.Node) -> None:
        n.target = checkpoint_as_eager
        n.kwargs = {}
    return _rewritten(gm, plain) if has_checkpoints(gm) else gm


def _rewritten(gm: fx.GraphModule, rewrite) -> fx.GraphModule:
    """A copy of gm, and of each subgraph that calls a checkpoint, with `rewrite` applied to each
    checkpoint call node in graph order; parameters and other subgraphs shared."""
    import copy
    hop = _hop()
    graph = copy.deepcopy(gm.graph)
    out = fx.GraphModule(gm, graph)
    for target, sub in list(_subgraph_modules(gm)):
        if has_checkpoints(sub):
            setattr(out, str(target), _rewritten(sub, rewrite))
    for n in graph.nodes:
        if n.op == "call_function" and n.target is hop:
            rewrite(n)
    out.recompile()
    return out


def _fresh_attr(gm: fx.GraphModule, base: str) -> str:
    k = 0
    while hasattr(gm, f"{base}_{k}"):
        k += 1
    return f"{base}_{k}"


def restore(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrites, in place, each marked invoke_subgraph call of the lowered graph gm (not of its
    subgraphs: each is restored when it is written) into tag_activation_checkpoint(body,
    *operands)."""
    hop = _hop()
    invoke = getattr(torch.ops.higher_order, "invoke_subgraph", None)
    rewrote = False
    for n in gm.graph.nodes:
        if (n.op == "call_function" and n.target is invoke and len(n.args) > 1
                and isinstance(n.args[1], str) and n.args[1].startswith(MARK)):
            n.target = hop
            n.args = (n.args[0], *n.args[2:])
            # Named as what they are (the lowering named them invoke_subgraph, repeated_subgraph0).
            if hasattr(n, "_rename"):
                n._rename("checkpoint")
            body = n.args[0]
            if isinstance(body, fx.Node) and body.op == "get_attr" and len(body.users) == 1:
                name = _fresh_attr(gm, "checkpoint_body")
                setattr(gm, name, getattr(gm, str(body.target)))
                body.target = name
                if hasattr(body, "_rename"):
                    body._rename(name)
            rewrote = True
    if rewrote:
        gm.graph.lint()
        gm.recompile()
    return gm
