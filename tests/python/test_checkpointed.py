"""checkpointed.py: checkpoint calls marked for the lowering and named back, run as the
program's eager ran them, the program's own graph module untouched, selective policies found."""
import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from parity_capture import checkpointed


def dynamo_graph(fn, *args):
    """The graph dynamo hands a backend for fn(*args)."""
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return gm
    torch._dynamo.reset()
    torch.compile(fn, backend=keep, fullgraph=True)(*args)
    torch._dynamo.reset()
    return graphs[0]


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


HOP = torch.ops.higher_order


def nested(x):
    inner = lambda t: torch.relu(t * 2 - 1)  # noqa: E731
    return checkpoint(lambda t: checkpoint(inner, t.sin(), use_reentrant=False), x, use_reentrant=False)


def test_marked_calls_are_a_copy_and_restore_names_them_back():
    gm = dynamo_graph(nested, torch.randn(4, 8))
    assert HOP.tag_activation_checkpoint in targets(gm)
    marked = checkpointed.as_marked_calls(gm)
    assert HOP.tag_activation_checkpoint in targets(gm), "the program's own graph was rewritten"
    (call,) = [n for n in marked.graph.nodes if n.target is HOP.invoke_subgraph]
    assert call.args[1].startswith(checkpointed.MARK)
    body = getattr(marked, call.args[0].target)
    assert not checkpointed.has_checkpoints(body), "the nested call was not marked"
    torch.testing.assert_close(marked(torch.ones(4, 8)), gm(torch.ones(4, 8)))
    checkpointed.restore(marked)
    (call,) = [n for n in marked.graph.nodes if n.target is HOP.tag_activation_checkpoint]
    assert call.name.startswith("checkpoint") and call.args[0].target.startswith("checkpoint_body")
    assert not any(isinstance(a, str) for a in call.args), call.args


def test_a_graph_without_checkpoints_is_returned_as_it_is():
    gm = dynamo_graph(lambda x: x.sin() + 1, torch.randn(3))
    assert checkpointed.as_marked_calls(gm) is gm and not checkpointed.has_checkpoints(gm)


def test_an_invoke_subgraph_of_the_program_is_not_named_a_checkpoint():
    @torch.compiler.nested_compile_region
    def block(t):
        return t.cos() * 2
    gm = dynamo_graph(lambda x: block(x) + block(x), torch.randn(3))
    before = targets(gm)
    checkpointed.restore(gm)
    assert targets(gm) == before and HOP.invoke_subgraph in before


def test_selective_policies_are_found():
    policy = functools.partial(create_selective_checkpoint_contexts, lambda ctx, op, *a, **k: CheckpointPolicy.MUST_SAVE)
    gm = dynamo_graph(lambda x: checkpoint(lambda t: t.sin().cos(), x, use_reentrant=False, context_fn=policy),
                      torch.randn(3, requires_grad=True))
    assert len(checkpointed.selective_policies(gm)) == 1
    assert checkpointed.selective_policies(dynamo_graph(nested, torch.randn(4, 8))) == []


def test_eager_calls_run_as_the_programs_checkpoint(monkeypatch):
    import torch.utils.checkpoint as tuc
    contexts = []
    real = tuc.create_selective_checkpoint_contexts

    def counted(*a, **k):
        contexts.append(1)
        return real(*a, **k)
    monkeypatch.setattr(tuc, "create_selective_checkpoint_contexts", counted)
    gm = dynamo_graph(nested, torch.randn(4, 8))
    eager = checkpointed.as_eager_calls(gm)
    assert HOP.tag_activation_checkpoint in targets(gm), "the program's own graph was rewritten"
    assert checkpointed.checkpoint_as_eager in targets(eager)
    (call,) = [n for n in eager.graph.nodes if n.target is checkpointed.checkpoint_as_eager]
    assert checkpointed.checkpoint_as_eager in targets(getattr(eager, call.args[0].target)), "the nested call"
    x1 = torch.randn(4, 8, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    (y1,), (y2,) = gm(x1), eager(x2)
    torch.autograd.backward([y1, y2], [torch.ones_like(y1), torch.ones_like(y2)])
    torch.testing.assert_close(y2, y1)
    torch.testing.assert_close(x2.grad, x1.grad)
    # torch's own eager of the call (gm) may run it under a selective-checkpoint mode; the copy never does.
    contexts.clear()
    eager(x2)[0].sum().backward()
    assert contexts == []
    plain = dynamo_graph(lambda x: x.sin(), torch.randn(3))
    assert checkpointed.as_eager_calls(plain) is plain
