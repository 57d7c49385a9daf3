"""parity_capture/compiled_autograd.py with fakes: a graph shaped as compiled autograd hands its
backend (a list input indexed by the graph, AccumulateGrad nodes whose result the graph goes on
using and returns) recorded as a graph of plain inputs that computes the accumulation itself.
Then a real one: a compiled train step under compiled autograd, in one process, captured and
verified. The distributed program that needs it (DDP's python reducer) is test_distributed.py's."""
import json
import operator
import subprocess
import sys

import torch

from conftest import verify
from parity_capture.compiled_autograd import RecordedCall, accumulated


def AccumulateGrad(grads, variable, variable_grad, has_post_hooks):
    """Stands for torch._dynamo.compiled_autograd.ops.AccumulateGrad as the lowering sees it:
    traced on copies of the parameters, it returns no gradient."""
    return [None]


AccumulateGrad.__module__ = "torch._dynamo.compiled_autograd.ops"


def backward_graph(old_grad: bool):
    """(inputs: list, param, [old]) -> the param's gradient after an accumulation, halved in place."""
    g = torch.fx.Graph()
    inputs = g.placeholder("L_inputs_")
    param = g.placeholder("L_param_")
    old = g.placeholder("L_old_") if old_grad else None
    grad = g.call_function(operator.getitem, (inputs, 1))
    acc = g.call_function(AccumulateGrad, ([grad], param, old, True))
    new = g.call_function(operator.getitem, (acc, 0))
    half = g.call_function(torch.div, (new, 2))
    g.call_method("copy_", (new, half))
    g.output((new,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_accumulation_is_computed_and_the_list_input_flattened():
    gm = backward_graph(old_grad=False)
    param = torch.nn.Parameter(torch.ones(3))
    inputs = [torch.zeros(3), torch.tensor([2.0, 4.0, 6.0]), torch.zeros(5)]
    call = RecordedCall.of(gm, [inputs, param])
    placeholders = [n.name for n in call.gm.graph.nodes if n.op == "placeholder"]
    # Only the list element the graph reads; the parameter is read by nothing once the
    # accumulation is a value.
    assert placeholders == ["l_inputs__1"], placeholders  # (FX names nodes in lower case)
    args = call.args([inputs, param])
    assert len(args) == 1 and args[0] is inputs[1]
    (out,) = call.gm(*args)
    assert torch.equal(out, torch.tensor([1.0, 2.0, 3.0]))
    assert not any(getattr(n.target, "__name__", "") == "AccumulateGrad" for n in call.gm.graph.nodes)


def test_a_gradient_already_held_is_added_to():
    gm = backward_graph(old_grad=True)
    param = torch.nn.Parameter(torch.ones(3))
    inputs = [torch.zeros(3), torch.tensor([2.0, 4.0, 6.0])]
    old = torch.tensor([10.0, 10.0, 10.0])
    call = RecordedCall.of(gm, [inputs, param, old])
    (out,) = call.gm(*call.args([inputs, param, old]))
    assert torch.equal(out, torch.tensor([6.0, 7.0, 8.0]))
    assert accumulated([torch.ones(2)], None)[0].tolist() == [1.0, 1.0]


def test_a_list_used_whole_becomes_an_input_per_element():
    g = torch.fx.Graph()
    xs = g.placeholder("xs")
    g.output((g.call_function(torch.stack, (xs,)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    values = [torch.tensor([1.0]), torch.tensor([2.0])]
    call = RecordedCall.of(gm, [values])
    assert [n.name for n in call.gm.graph.nodes if n.op == "placeholder"] == ["xs_0", "xs_1"]
    (out,) = call.gm(*call.args([values]))
    assert out.flatten().tolist() == [1.0, 2.0]


def test_other_graphs_are_recorded_as_they_are():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.relu, (x,)),))
    assert RecordedCall.of(torch.fx.GraphModule(torch.nn.Module(), g), [torch.ones(1)]) is None


STEP = """
import sys, torch
torch._dynamo.config.compiled_autograd = True  # before torch.compile, as PyTorch asks
from parity_capture import dump_backend
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))

@torch.compile(backend=dump_backend(sys.argv[1], model_name="step"))
def step(x):
    loss = model(x).square().mean()
    loss.backward()
    return loss

step(torch.randn(8, 16))
print(" ".join(str(float(p.grad.sum())) for p in model.parameters()))
"""


def test_a_compiled_train_step_under_compiled_autograd_records_its_backward_and_verifies(parity_bin, tmp_path):
    (tmp_path / "step.py").write_text(STEP)
    out = tmp_path / "dump"
    p = subprocess.run([sys.executable, str(tmp_path / "step.py"), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.load(open(out / "manifest.json"))
    assert not m.get("skipped_graphs"), m["skipped_graphs"]
    # The forward, then compiled autograd's graphs: the backward returns the 4 parameters' gradients.
    assert [g["mode"] for g in m["graphs"]][0] == "train" and len(m["graphs"]) >= 2, m["graphs"]
    backward = m["graphs"][-1]
    assert len(backward["expected_outputs"]) == 4, backward
    grads = [float(x) for x in p.stdout.split()]
    from safetensors.torch import load_file
    stored = load_file(str(out / "tensors.safetensors"))
    assert sorted(round(float(stored[k].sum()), 4) for k in backward["expected_outputs"]) == \
        sorted(round(g, 4) for g in grads), (grads, backward)
    r, recs = verify(parity_bin, tmp_path / "v", out, "--backend", "eager", "--backend", "aot_eager")
    assert r.returncode == 0 and {x["verification_code"] for x in recs} == {"PASS"}, r.stdout + r.stderr
