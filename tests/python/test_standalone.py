"""The standalone repro.py's runs (tools/parity_capture/standalone.py, inlined into repro.py and
used by the worker's compiler bisection): a graph that pins dtypes (autocast's casts, a factory
op's dtype) runs as parity's fp64 reference does, in float64 throughout (in_run_dtype, the
interpreter's rule in interpreter/layout.h), where casting only its parameters and inputs failed
("self and mat2 must have the same dtype")."""
import os
import sys

import pytest
import torch
import torch.fx as fx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
from parity_capture import standalone, standalone_graph  # noqa: E402

aten = torch.ops.aten


class Pinned(torch.nn.Module):
    """linear in bfloat16 (autocast's casts as the ATen graph records them), plus a float32
    constant made by a factory op, plus one made with no dtype (torch's default)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        xb = aten._to_copy.default(x, dtype=torch.bfloat16)
        wb = aten._to_copy.default(self.w, dtype=torch.bfloat16)
        y = aten.linear.default(xb, wb)
        c = aten.full.default([2, 4], 0.5, dtype=torch.float32)
        d = aten.full.default([2, 4], 0.25)
        return (aten.mm.default(aten._to_copy.default(y, dtype=torch.float32) + c + d, self.w),)


def test_every_floating_dtype_follows_the_run_and_the_original_is_kept():
    torch.manual_seed(0)
    gm = fx.symbolic_trace(Pinned())
    x = torch.randn(2, 3)
    before = gm.code
    fp64 = standalone.in_run_dtype(gm, torch.float64)
    (got,) = standalone.run(fp64, [x], "cpu", torch.float64).values()
    assert got.dtype == torch.float64
    w = gm.w.detach().double()
    want = ((x.double() @ w.t()) + 0.75) @ w
    torch.testing.assert_close(got, want)  # no bfloat16 rounding left in it
    assert gm.code == before and gm.w.dtype == torch.float32  # a copy
    (plain,) = standalone.run(gm, [x], "cpu").values()  # the graph as recorded: bfloat16 inside
    assert plain.dtype == torch.float32 and not torch.equal(plain.double(), want)


def test_the_rule_reaches_the_graphs_inside_higher_order_ops():
    class Branches(torch.nn.Module):
        def forward(self, x):
            def t(x):
                return (aten._to_copy.default(x, dtype=torch.float16) * 3).float()

            def f(x):
                return x - 1
            return (torch.cond(x.sum() > 0, t, f, (x,)),)
    from torch.fx.experimental.proxy_tensor import make_fx
    x = torch.full((3,), 1.0 / 3)
    gm = make_fx(Branches())(x)
    assert any(isinstance(m, fx.GraphModule) for m in gm.children())
    (got,) = standalone.run(standalone.in_run_dtype(gm, torch.float64), [x], "cpu", torch.float64).values()
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, torch.full((3,), 1.0, dtype=torch.float64))  # float16 would round 1/3


def test_an_autocast_train_step_as_captured_runs_in_float64(tmp_path):
    # What a user's amp program records (dump_backend): parameters cast to bfloat16 inside the graph.
    from parity_capture import dump_backend
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def step(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return m(x).float().square().mean()
    out = tmp_path / "amp"
    torch.compile(step, backend=dump_backend(str(out)))(torch.randn(4, 8))
    torch._dynamo.reset()
    _, gm, inputs = standalone.load_dir(str(out))
    assert "torch.bfloat16" in gm.code
    ref = list(standalone.run(gm, inputs, "cpu").values())
    fp64 = list(standalone.run(standalone.in_run_dtype(gm, torch.float64), inputs, "cpu", torch.float64).values())
    assert [t.dtype for t in fp64] == [torch.float64] * len(ref)
    for a, b in zip(ref, fp64):
        torch.testing.assert_close(a.double(), b, rtol=5e-2, atol=5e-2)  # bfloat16's rounding apart


class Made(torch.nn.Module):
    """Ops whose device is an argument, as a CPU capture records them (device=cpu)."""

    def forward(self, x):
        r = aten.arange.default(4, dtype=torch.float32, device=torch.device("cpu"))
        c = aten._to_copy.default(x, dtype=torch.float32, device=torch.device("cpu"))
        return (c * r + aten.full.default([4], 2.0, device=torch.device("cpu")),)


def test_a_graph_run_on_another_device_takes_its_device_arguments_along():
    # A dir captured on the CPU and verified with --device cuda: the backend's graph made its
    # arange, full and _to_copy on the CPU and failed ("found two different devices cpu, cuda:0").
    # The interpreter's rule: every device argument is the run's device. Checked on "meta".
    gm = fx.symbolic_trace(Made())
    moved = standalone.on_device(gm, "meta")
    devices = [a for n in moved.graph.nodes for a in list(n.args) + list(n.kwargs.values()) if isinstance(a, torch.device)]
    assert devices and all(d.type == "meta" for d in devices), devices
    (out,) = moved(torch.empty(4, device="meta"))
    assert out.device.type == "meta"


def test_size_expressions_evaluate_as_the_interpreter_does():
    # repro.py's evaluator of size expressions, beside repro/sym_expr.cpp's (the same table)
    b = {"s0": 5, "s1": 6}
    cases = {
        "RoundToInt(IntTrueDiv(s0, 2))": 2,  # halves to even
        "BitwiseFn_bitwise_xor(s0, 3) + LShift(s0, 2) + RShift(s1, 1)": 6 + 20 + 3,
        "CeilToInt(IntTrueDiv(s0, 3)) + TruncToInt(1.5*ToFloat(s0)) + ModularIndexing(s1 + 7, 2, 4)": 2 + 7 + 2,
        "Where(s0 > 3, 10, 20) + PowByNatural(s0, 2)": 35,
        "IsNonOverlappingAndDenseIndicator(s0, s1, 6, 1) + IsNonOverlappingAndDenseIndicator(s0, s1, 12, 2)": 1,
        "Ne(s0, 1) & (s1 >= 2)": True,
    }
    for expr, want in cases.items():
        assert standalone_graph.eval_size(expr, b) == want, expr
    assert abs(standalone_graph.eval_size("OpaqueUnaryFn_sqrt(ToFloat(s0)) + FloatPow(2.0, IntTrueDiv(s0, 4))", b) - (5 ** 0.5 + 2 ** 1.25)) < 1e-12


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_device_without_an_index_is_the_current_one():
    # A program run with torch.set_default_device("cuda") records device=cuda in export's
    # metadata checks; the tensors are on cuda:0, and the run compares the two.
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.mul.Tensor, (x, 2))
    g.call_function(torch.ops.aten._assert_tensor_metadata.default, (y, None, None, torch.float32),
                    {"device": torch.device("cuda"), "layout": torch.strided})
    g.output((y,))
    gm = standalone.on_device(fx.GraphModule(torch.nn.Module(), g), "cuda")
    (out,) = gm(torch.ones(3, device="cuda"))
    assert out.device == torch.device("cuda", torch.cuda.current_device())


def test_a_cpp_backends_script_names_the_command_with_its_dir_as_one_word(tmp_path, capsys):
    """repro.py (standalone.main) of a backend that runs only in parity's C++ runtime prints the
    command that runs it; a dir with a space is quoted so the command can be copied."""
    import json
    import shutil
    src = os.path.join(os.environ.get("PARITY_TEST_DATA", ""), "models", "mlp")
    if not os.path.isdir(src):
        pytest.skip("PARITY_TEST_DATA is not set (run through ctest)")
    d = tmp_path / "a dir" / "min"
    shutil.copytree(src, d)
    m = json.load(open(d / "manifest.json"))
    m["backend"] = {"name": "fault", "options": {"op": "aten::relu"}}
    json.dump(m, open(d / "manifest.json", "w"))
    assert standalone.main(str(d), None) == 2
    assert f"parity repro run '{d}' --backend fault" in capsys.readouterr().out
