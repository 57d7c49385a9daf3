"""backward_graph.py on a plain graph (the DTensor case runs in test_distributed.py): the recorded
backward returns each differentiated input's gradient, equal to autograd's, named grad/<input>, and
takes the values the forward saves and the output gradients; a call whose output gradients do not
match the backward's is refused, naming both counts."""
import pytest
import torch
import torch.fx

from parity_capture import backward_graph
from parity_capture.errors import CaptureError


def block(x, w, b, v):
    return torch.tanh(x @ w + b) @ v, (x * 2).sum()


def test_the_backward_returns_autograd_s_gradients_of_the_differentiated_inputs():
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(block)
    x = torch.randn(4, 8)
    w, b, v = (torch.randn(*s, requires_grad=True) for s in ((8, 16), (16,), (16, 3)))
    grads = [torch.randn(4, 3)]  # the program fed the first output only; x needs no grad
    args = [x, w, b, v]
    labels = ["input/x", "param/w", "param/b", "param/v"]
    gjson, entry, tensors = backward_graph.record("g_backward", gm, args, labels, grads)
    assert entry["output_names"] == ["grad/param/w", "grad/param/b", "grad/param/v"], entry
    expected = torch.autograd.grad(block(x, w, b, v)[0], [w, b, v], grads[0])
    for key, want in zip(entry["expected_outputs"], expected):
        torch.testing.assert_close(tensors[key], want)
    # Its inputs: the saved values and the one output gradient, recorded.
    assert len(entry["inputs"]) >= 2 and all(k in tensors for k in entry["inputs"].values())
    assert any(n.get("target", "").startswith("aten::tanh_backward") for n in gjson["nodes"]), gjson["nodes"]


def test_output_gradients_that_do_not_match_the_backward_are_refused():
    gm = torch.fx.symbolic_trace(block)
    w, b, v = (torch.randn(*s, requires_grad=True) for s in ((8, 16), (16,), (16, 3)))
    with pytest.raises(CaptureError, match="takes 1 output gradients, the program fed 2"):
        backward_graph.record("g_backward", gm, [torch.randn(4, 8), w, b, v], [None] * 4,
                              [torch.randn(4, 3), torch.randn(())])
    assert not backward_graph.wanted(gm, [torch.randn(2), w])  # plain tensors, no collective: the replay differentiates it


def two_outputs(x, w):
    h = x @ w
    return torch.tanh(h), h.sum(0)


def test_an_output_no_gradient_reached_takes_zeros():
    """Both outputs require grad, so AOTAutograd's backward takes a gradient for each; the program's
    loss reached the first only (None for the second): the second's slot gets zeros, as autograd
    materializes them, and the recorded gradients are autograd's for the first output alone."""
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(two_outputs)
    x, w = torch.randn(4, 8), torch.randn(8, 3, requires_grad=True)
    fed = torch.randn(4, 3)
    gjson, entry, tensors = backward_graph.record("g_backward", gm, [x, w], ["input/x", "param/w"], [fed, None])
    assert entry["output_names"] == ["grad/param/w"], entry
    (want,) = torch.autograd.grad(two_outputs(x, w)[0], [w], fed)
    torch.testing.assert_close(tensors[entry["expected_outputs"][0]], want)
    zeros = [t for k, t in tensors.items() if k in entry["inputs"].values() and t.shape == (3,)]
    assert zeros and all(not z.any() for z in zeros), entry["inputs"]


class RoundSTE(torch.autograd.Function):
    """A straight-through estimator: rounds forward, passes the gradient through unchanged (the
    derivative of round is zero)."""

    @staticmethod
    def forward(ctx, x, scale):
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, g):
        return g, None


def test_a_custom_autograd_function_s_backward_is_recorded_as_its_own_graph(tmp_path):
    """Differentiating the recorded forward would differentiate `round` (zero gradients); the
    program ran the Function's own backward. The dump backend records that backward, AOTAutograd's
    partition of dynamo's autograd_function_apply, as <graph>_backward, with the program's
    gradients."""
    import json
    import os
    from safetensors.torch import load_file
    from parity_capture import dump_backend
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    torch._dynamo.reset()
    f = torch.compile(lambda x: RoundSTE.apply(lin(x), 16.0).sum(), backend=dump_backend(str(tmp_path / "ste")))
    f(torch.randn(4, 8)).backward()
    torch._dynamo.reset()
    m = json.load(open(tmp_path / "ste" / "manifest.json"))
    names = [g["name"] for g in m["graphs"]]
    assert names == ["graph_0", "graph_0_backward"], (names, m.get("skipped_graphs"))
    bwd = m["graphs"][1]
    tensors = load_file(os.path.join(tmp_path / "ste", m["tensors"]))
    got = dict(zip(bwd["output_names"], (tensors[k] for k in bwd["expected_outputs"])))
    weight = next(v for n, v in got.items() if n.endswith("weight"))
    assert weight.abs().sum() > 0  # round's derivative would make it zero
    torch.testing.assert_close(weight, lin.weight.grad)
