"""differentiable.py: calls autograd cannot differentiate (functionalization's twins of in-place
ops) rewritten into calls it can, with the program's values and gradients; end to end, a train
program writing complex values and copying into its own buffer verifies."""
import json

import pytest
import torch
from torch.func import functionalize
from torch.fx.experimental.proxy_tensor import make_fx

from conftest import verify
from parity_capture.differentiable import differentiable_calls

aten = torch.ops.aten


def _copy_broadcast_cast(w, x):  # copy_ with a broadcast and a cast into a buffer made here
    buf = torch.zeros(3, 4, dtype=torch.bfloat16)
    buf.copy_(x * w)
    return buf.float().sin()


def _complex_slice(w, x):  # an FNO's spectral write, dim counted from the end
    out = torch.zeros(x.shape[0], 6, dtype=torch.cfloat)
    out[..., :2] = x[:, :2] * w[:2]
    return torch.view_as_real(out).pow(2)


def _complex_select(w, x):
    out = torch.zeros(x.shape[0], 4, dtype=torch.cfloat)
    out[:, 1] = x[:, 0] * w[0]
    return out.abs()


def _complex_zero(w, x):
    z = x * w[:4]
    z.zero_()
    return (z + x * w[1]).abs()


def _stop_gradient(w, x):  # detach, as make_fx's lowering writes it (detach_copy)
    y = x * w
    return y * y.detach()


def _real_index_put(w, x):  # autograd differentiates every call: left as it is
    out = torch.zeros(x.shape[0], 6)
    out[[0, 2]] = x[[0, 1], :1] * w[:1]
    return out.exp()


CASES = [
    (_copy_broadcast_cast, torch.float32, "aten.copy.default"),
    (_complex_slice, torch.cfloat, "aten.slice_scatter.default"),
    (_complex_select, torch.cfloat, "aten.select_scatter.default"),
    (_complex_zero, torch.cfloat, "aten.zero.default"),
    (_stop_gradient, torch.float32, "aten.detach_copy.default"),
]


def _traced(fn, w, x):
    """The function as a capture records it: functionalized ATen, traced on real values."""
    with torch.enable_grad():
        return make_fx(functionalize(fn, remove="mutations_and_views"), tracing_mode="real")(w, x)


def _targets(gm):
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def _refused(gm, op):
    """The calls of `op` autograd refuses: copy's all, the others' of complex values."""
    return [n.name for n in gm.graph.nodes if str(n.target) == op
            and (op in ("aten.copy.default", "aten.detach_copy.default") or n.meta["val"].dtype.is_complex)]


def _grad(f, w, x):
    w = w.detach().requires_grad_(True)
    out = f(w, x)
    out = out[0] if isinstance(out, (list, tuple)) else out
    (g,) = torch.autograd.grad(out.sum(), [w])
    return out.detach(), g


@pytest.mark.parametrize("fn,dtype,op", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_call_autograd_refuses_is_rewritten_with_the_programs_values_and_gradients(fn, dtype, op):
    torch.manual_seed(0)
    w, x = torch.randn(4, dtype=dtype), torch.randn(3, 4)
    gm = _traced(fn, w, x)
    assert _refused(gm, op)
    with pytest.raises(RuntimeError, match="derivative|complex dtype"):  # what every run of it met
        _grad(gm, w, x)
    names = {n.name for n in gm.graph.nodes}
    gm = differentiable_calls(gm)
    assert not _refused(gm, op)
    assert names <= {n.name for n in gm.graph.nodes}  # the call's node keeps its name
    out, g = _grad(gm, w, x)
    want_out, want_g = _grad(fn, w, x)  # the program's own in-place ops and their derivatives
    assert torch.equal(out, want_out)
    assert torch.allclose(g, want_g, rtol=1e-6, atol=1e-6)


def test_a_call_autograd_differentiates_is_left_as_it_is():
    w, x = torch.randn(4), torch.randn(3, 4)
    gm = _traced(_real_index_put, w, x)
    before = [(n.name, str(n.target)) for n in gm.graph.nodes]
    assert [(n.name, str(n.target)) for n in differentiable_calls(gm).graph.nodes] == before


def test_a_rewritten_call_keeps_its_recorded_value():
    w, x = torch.randn(4, dtype=torch.cfloat), torch.randn(3, 4)
    gm = differentiable_calls(_traced(_complex_slice, w, x))
    node = next(n for n in gm.graph.nodes if n.name.startswith("slice_scatter") and n.target is aten.view_as_complex.default)
    assert node.meta["val"].dtype == torch.cfloat and list(node.meta["val"].shape) == [3, 6]
    scatter = node.args[0]
    assert scatter.target is aten.slice_scatter.default and scatter.args[2] == 1  # -1 counted on the complex value
    assert list(scatter.meta["val"].shape) == [3, 6, 2]


class Spectral(torch.nn.Module):
    """A spectral layer (an FNO's): the low modes written into a complex buffer, the result
    copied into a buffer of its own."""

    def __init__(self):
        super().__init__()
        self.lift = torch.nn.Linear(4, 8)
        self.w = torch.nn.Parameter(torch.randn(8, 3, dtype=torch.cfloat) / 8)

    def forward(self, x):
        h = self.lift(x).transpose(1, 2)
        xf = torch.fft.rfft(h, dim=-1)
        out = torch.zeros_like(xf)
        out[..., :3] = xf[..., :3] * self.w
        y = torch.fft.irfft(out, n=h.shape[-1], dim=-1)
        buf = torch.empty_like(y)
        buf.copy_(y)
        return buf.square().mean()


def test_a_train_program_writing_complex_values_into_its_buffers_verifies(tmp_path, parity_bin):
    from parity_capture import dump_backend
    torch.manual_seed(0)
    out = tmp_path / "cap"
    torch._dynamo.reset()
    torch.compile(Spectral(), backend=dump_backend(str(out)))(torch.randn(2, 16, 4)).backward()
    torch._dynamo.reset()
    entry = json.load(open(out / "manifest.json"))["graphs"][0]
    assert entry["mode"] == "train" and "param/w" in entry["requires_grad"]
    r, records = verify(parity_bin, tmp_path / "v", out, "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [rec["verification_code"] for rec in records] == ["PASS"]
