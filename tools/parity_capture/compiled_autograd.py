"""Compiled autograd's graphs as parity records them (docs/distributed.md).

With `torch._dynamo.config.compiled_autograd = True` a backward reaches the backend as graphs of
autograd nodes, in two shapes a repro dir cannot hold as they are:

- Their inputs include a Python list (the backward's gradients, `L_inputs_`). The recorded
  graph takes the list's elements the graph reads as inputs of their own.
- Each parameter's gradient goes through an `AccumulateGrad` node, which returns the gradient
  the parameter will hold; the graph may go on computing with it (DDP's python reducer divides it
  by the world size and all-reduces it into place) and returns it, for dynamo to set as
  `Parameter.grad` once the graph ran. Traced on copies of the parameters (parity's lowering),
  the node returns None. The recorded graph computes the accumulation itself: the incoming
  gradient, added to the gradient the parameter held where the graph was handed one. The
  parameter itself is then read by nothing and is no input of the recorded graph.

The graph's outputs, the parameters' final gradients among them, are the program's own, and so
are their expected values. The program runs its own graph, untouched."""
from __future__ import annotations

import copy
import operator
from typing import Any, List, Optional, Sequence

import torch


def is_accumulate_grad(node: torch.fx.Node) -> bool:
    """Whether `node` calls compiled autograd's AccumulateGrad op."""
    if node.op != "call_function":
        return False
    target = node.target
    return getattr(target, "__name__", "") == "AccumulateGrad" and "compiled_autograd" in getattr(target, "__module__", "")


def accumulated(grads: Sequence[torch.Tensor], variable_grad: Optional[torch.Tensor]) -> List[torch.Tensor]:
    """What AccumulateGrad returns, as a value: the incoming gradient, or its sum with the
    gradient the parameter held."""
    grad = grads[0]
    return [grad if variable_grad is None else variable_grad + grad]


def _as_list(*items: Any) -> List[Any]:
    return list(items)


class RecordedCall:
    """The graph recorded in place of a compiled-autograd graph, and the arguments of each call
    as that graph takes them (`args`)."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        graph = copy.deepcopy(gm.graph)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for node in list(graph.nodes):
            if is_accumulate_grad(node):  # AccumulateGrad(grads, variable, variable_grad, has_post_hooks)
                node.target = accumulated
                node.args = (node.args[0], node.args[2] if len(node.args) > 2 else None)
        # Per input of gm: None (kept as is), [] (read by nothing once the accumulation is a
        # value: dropped), or the list elements taken, in order.
        self.picks: List[Optional[List[int]]] = []
        for k, p in enumerate(placeholders):
            value = example_inputs[k] if k < len(example_inputs) else None
            if isinstance(value, (list, tuple)):
                self.picks.append(self._flatten(graph, p, len(value)))
            elif not p.users and isinstance(value, torch.nn.Parameter):
                graph.erase_node(p)
                self.picks.append([])
            else:
                self.picks.append(None)
        graph.lint()
        self.gm = torch.fx.GraphModule(gm, graph)

    @staticmethod
    def _flatten(graph: torch.fx.Graph, p: torch.fx.Node, size: int) -> List[int]:
        """List input `p` of `size` elements as an input per element: those it is indexed by
        where indexing is all the graph does with it, else every one."""
        indexed = all(u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
                      and not u.kwargs for u in p.users)
        taken = sorted({u.args[1] % size for u in p.users}) if indexed else list(range(size))
        with graph.inserting_before(p):
            items = {i: graph.placeholder(f"{p.name}_{i}") for i in taken}
        if indexed:
            for u in list(p.users):
                u.replace_all_uses_with(items[u.args[1] % size])
                graph.erase_node(u)
        else:
            with graph.inserting_after(items[taken[-1]] if taken else p):
                whole = graph.call_function(_as_list, tuple(items[i] for i in taken))
            p.replace_all_uses_with(whole)
        graph.erase_node(p)
        return taken

    def args(self, args: Sequence[Any]) -> List[Any]:
        """A call's arguments of gm as the recorded graph takes them."""
        out: List[Any] = []
        for a, taken in zip(args, self.picks):
            if taken is None:
                out.append(a)
            elif isinstance(a, (list, tuple)):
                out.extend(a[i] for i in taken)
        return out

    @staticmethod
    def of(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Optional["RecordedCall"]:
        """The recorded form of `gm`, or None when gm is no compiled-autograd graph (no list
        input, no AccumulateGrad)."""
        if not any(isinstance(v, (list, tuple)) for v in example_inputs) and \
                not any(is_accumulate_grad(n) for n in gm.graph.nodes):
            return None
        return RecordedCall(gm, example_inputs)
