"""Capture -> repro dir -> C++ run, end to end; the reader; the dynamo dump backend."""
import json
import os

import pytest
import torch

from conftest import run_parity
from parity_capture import capture, dump_backend, load_repro, models
from parity_capture.errors import CaptureError
from parity_capture.serialize import encode_arg


@pytest.mark.parametrize("name", ["mlp", "resnet", "llama", "bert"])
def test_reader_rebuilds_runnable_graphs(test_data, name):
    repro = load_repro(os.path.join(test_data, "models", name))
    for g in repro.graphs:
        out = g.module(*g.inputs())
        for got, want in zip(out, g.expected_outputs()):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_capture_records_real_values_and_metadata(tmp_path):
    spec, model, args, kwargs = models.build("mlp")
    capture(model, args, str(tmp_path / "mlp"), name="mlp")
    manifest = json.loads((tmp_path / "mlp" / "manifest.json").read_text())
    assert manifest["version"] == 3 and manifest["torch_version"] == torch.__version__
    assert manifest["producer"].endswith("(torch.export)")
    repro = load_repro(str(tmp_path / "mlp"))
    # Parameters are the model's own, not regenerated.
    torch.testing.assert_close(repro.tensors["param/layers.0.weight"], model.layers[0].weight.detach(), rtol=0, atol=0)
    torch.testing.assert_close(repro.graphs[0].inputs()[0], args[0], rtol=0, atol=0)
    gjson = json.loads((tmp_path / "mlp" / "graphs" / "graph_0.json").read_text())
    linear = next(n for n in gjson["nodes"] if n.get("target") == "aten::linear")
    assert linear["meta"]["val"][0]["shape"] == [8, 128]
    assert "stack_trace" in linear["meta"] and linear["meta"]["module_path"] == "layers.0"


def test_train_capture_keeps_the_models_source_not_paritys_wrapper(tmp_path):
    spec, model, args, kwargs = models.build("mlp")
    capture(model, args, str(tmp_path / "mlp"), name="mlp", mode="train", loss_fn=spec.loss)
    gjson = json.loads((tmp_path / "mlp" / "graphs" / "graph_0.json").read_text())
    traces = [n["meta"]["stack_trace"] for n in gjson["nodes"] if n.get("meta", {}).get("stack_trace")]
    assert traces and not any("parity_capture/capture.py" in t for t in traces), traces[:3]
    linear = next(n for n in gjson["nodes"] if n.get("target") == "aten::linear")
    assert 'parity_capture/models.py", line' in linear["meta"]["stack_trace"]  # the model's own file


def test_user_stack_trace_drops_only_the_wrappers_frames():
    from parity_capture.serialize import _WRAPPER_FILE, user_stack_trace
    st = (f'File "{_WRAPPER_FILE}", line 105, in forward\n    out = self.model(*args)\n'
          '  File "/m/model.py", line 7, in forward\n    return self.fc(x)')
    assert user_stack_trace(st) == '  File "/m/model.py", line 7, in forward\n    return self.fc(x)'
    assert user_stack_trace('File "/m/model.py", line 7, in f\n    y = g(x)\n') == 'File "/m/model.py", line 7, in f\n    y = g(x)'
    assert user_stack_trace(f'File "{_WRAPPER_FILE}", line 106, in forward\n    return self.loss_fn(out), out') == ""


def test_make_fx_fallback_runs_in_cpp(tmp_path, parity_bin):
    spec, model, args, kwargs = models.build("resnet")
    out = str(tmp_path / "resnet_fx")
    capture(model, args, out, name="resnet", method="make_fx")
    r = run_parity(parity_bin, "repro", "run", out)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dump_backend_captures_every_graph_with_real_inputs(tmp_path, parity_bin):
    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Linear(8, 4)

        def forward(self, x):
            y = torch.relu(self.a(x))
            torch._dynamo.graph_break()
            return torch.sigmoid(self.b(y)) * 2

    torch.manual_seed(0)
    m = Broken().eval()
    x = torch.randn(3, 8)
    out_dir = str(tmp_path / "prog")
    torch._dynamo.reset()
    compiled = torch.compile(m, backend=dump_backend(out_dir, "broken"))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x))
    torch._dynamo.reset()
    repro = load_repro(out_dir)
    assert [g.name for g in repro.graphs] == ["graph_0", "graph_1"]
    assert any(torch.equal(t, x) for t in repro.graphs[0].inputs())  # the real input, not randn
    r = run_parity(parity_bin, "repro", "run", out_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "graph graph_1" in r.stdout


def test_unsupported_values_are_reported():
    with pytest.raises(CaptureError):
        encode_arg(object())


def _fused_kernel(x_ptr, out_ptr, n):  # stands in for a user's @triton.jit kernel (no Triton on the CPU)
    pass


def test_a_triton_kernel_launched_directly_is_refused_naming_it_and_the_way_to_record_it():
    """dynamo records a Triton kernel the model launches itself as triton_kernel_wrapper_* with the
    kernel's index in torch's side table, which only the program's process holds; it was written
    as a dir no parity could load ("getitem takes (node, int)")."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table, triton_kernel_wrapper_functional
    from parity_capture.serialize import graph_to_json
    g = torch.fx.Graph()
    x = g.placeholder("x")
    call = g.call_function(triton_kernel_wrapper_functional, (), {
        "kernel_idx": kernel_side_table.add_kernel(_fused_kernel), "constant_args_idx": 0, "grid": [(1, 1, 1)],
        "tma_descriptor_metadata": {}, "kwargs": {"x_ptr": x, "out_ptr": x}, "tensors_to_clone": ["out_ptr"]})
    g.output(g.call_function(__import__("operator").getitem, (call, "out_ptr")))
    with pytest.raises(CaptureError, match=r"Triton kernel test_capture\._fused_kernel launched directly; .*triton_op"):
        graph_to_json(torch.fx.GraphModule(torch.nn.Module(), g), "graph_0", {})


def test_suite_models_build_and_run():
    for name in models.names():
        spec, model, args, kwargs = models.build(name)
        model.eval()
        with torch.no_grad():
            out = model(*args, **kwargs)
        loss = spec.loss(out)
        assert torch.isfinite(loss), name


class Complex(torch.nn.Module):
    """complex128 and complex32 outputs (safetensors has neither: stored as their real view)."""

    def forward(self, x):
        z = torch.view_as_complex(x.reshape(4, 2)).cdouble()
        return z * z.conj(), torch.view_as_complex(x.reshape(4, 2).half()), x.abs()


def test_complex_values_round_trip_and_replay_with_their_fp64_reference(tmp_path, parity_bin):
    x = torch.randn(8)
    capture(Complex(), (x,), str(tmp_path / "c"))
    outs = [load_repro(str(tmp_path / "c")).tensors[k] for k in json.load(open(tmp_path / "c" / "manifest.json"))["graphs"][0]["expected_outputs"]]
    assert [o.dtype for o in outs] == [torch.complex128, torch.complex32, torch.float32]
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "c"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (g,) = json.loads(r.stdout)["graphs"]
    assert g["pass"] and g["fp64_reference"], g


def test_a_value_read_out_of_a_tensor_is_a_recorded_constant(tmp_path, parity_bin):
    """torch.cov reads a tensor's value in Python (torch.equal): traced on the real values, that
    value is a constant of the graph, and the entry says so."""
    x = torch.randn(3, 5)
    capture(lambda_module(lambda t: torch.cov(t)), (x,), str(tmp_path / "cov"))
    (entry,) = json.load(open(tmp_path / "cov" / "manifest.json"))["graphs"]
    assert "constants of this graph" in entry.get("note", ""), entry
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "cov"))
    assert r.returncode == 0, r.stdout + r.stderr


def lambda_module(fn):
    class M(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    return M()


def test_a_graph_that_computes_none_of_the_outputs_is_refused(tmp_path):
    with pytest.raises(CaptureError, match="nothing to replay"):
        capture(lambda_module(lambda a, b: torch.equal(a, b)), (torch.ones(3), torch.ones(3)), str(tmp_path / "eq"))


class WritesItsInput(torch.nn.Module):
    """An optimizer-step-like forward: writes its argument in place and returns nothing else."""

    def forward(self, x, y):
        x.mul_(2).add_(y)
        return y * 3


@pytest.mark.parametrize("method", ["export", "make_fx"])
def test_an_input_the_model_writes_is_an_output_and_the_callers_tensor_is_left_as_it_was(tmp_path, parity_bin, method):
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    x0 = x.clone()
    capture(WritesItsInput(), (x, y), str(tmp_path / "w"), method=method)
    assert torch.equal(x, x0)  # capture's own call of the model is undone
    repro = load_repro(str(tmp_path / "w"))
    (g,) = repro.graphs
    assert g.entry["output_names"][1].startswith("mutated/"), g.entry["output_names"]
    assert torch.equal(g.expected_outputs()[1], x0 * 2 + y) and torch.equal(g.inputs()[0], x0)
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "w"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_opaque_input_the_graph_only_returns_is_returned_as_none_and_one_it_reads_is_refused():
    """lowering.without_opaque_inputs: dynamo hands a DeviceMesh on across a graph break as an input
    and an output of the graph (a sequence-parallel block whose DTensor reshapes break the graph);
    the format has no type for it, so the graph returns None there and the program's outputs say
    None too. A graph whose op reads such an input cannot be recorded: CaptureError naming it."""
    import torch.fx as fx
    from parity_capture.lowering import without_opaque_inputs

    class Mesh:  # an object the format has no type for
        pass

    def returned(x, mesh):
        return (x * 2, mesh)
    mesh = Mesh()
    gm = fx.symbolic_trace(returned)
    gm, kept, outs = without_opaque_inputs(gm, [torch.ones(2), mesh], [torch.full((2,), 2.0), mesh])
    assert len(kept) == 1 and outs[1] is None and torch.equal(outs[0], torch.full((2,), 2.0))
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_function", "output"]
    assert gm(torch.ones(2))[1] is None

    g = fx.Graph()
    x, m = g.placeholder("x"), g.placeholder("mesh")
    g.output((g.call_function(getattr, (m, "size")), x))
    with pytest.raises(CaptureError, match="graph input mesh is a Mesh, which the graph reads"):
        without_opaque_inputs(fx.GraphModule(torch.nn.Module(), g), [torch.ones(2), mesh])
