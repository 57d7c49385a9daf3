"""tools/parity_capture/runs.py: a worker request's one graph, read alone (load_graph); one timed
iteration (iteration), alone and as a Python backend's timed train runs take it."""
import json
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
from parity_capture import reader  # noqa: E402
from parity_capture.runs import load_graph  # noqa: E402


@pytest.fixture
def two_graphs(tmp_path):
    """The mlp test model's dir with a second graph entry (the same graph, its parameters not
    differentiated in a train run)."""
    data = os.environ.get("PARITY_TEST_DATA") or pytest.skip("PARITY_TEST_DATA is not set")
    d = tmp_path / "mlp"
    shutil.copytree(os.path.join(data, "models", "mlp"), d)
    m = json.loads((d / "manifest.json").read_text())
    second = dict(m["graphs"][0], name="second", requires_grad=[])
    m["graphs"].append(second)
    (d / "manifest.json").write_text(json.dumps(m))
    return str(d)


def test_only_the_requested_graph_is_built(two_graphs, monkeypatch):
    built = []
    real = reader.graph_from_json
    monkeypatch.setattr(reader, "graph_from_json", lambda *a, **k: built.append(1) or real(*a, **k))
    repro, g = load_graph({"repro": two_graphs, "graph": "second"})
    assert g.name == "second" and [x.name for x in repro.graphs] == ["second"] and len(built) == 1
    _, first = load_graph({"repro": two_graphs})  # no graph named: the first
    assert first.name == "graph_0" and len(built) == 2


def test_a_train_request_gets_parameters_where_its_graph_differentiates(two_graphs):
    _, g = load_graph({"repro": two_graphs, "mode": "train"})
    assert [n for n, _ in g.module.named_parameters()]
    _, g = load_graph({"repro": two_graphs, "mode": "train", "graph": "second"})  # requires_grad: [] differentiates nothing
    assert not list(g.module.named_parameters())
    _, g = load_graph({"repro": two_graphs, "graph": "graph_0"})  # eval: no parameters
    assert not list(g.module.named_parameters())


def test_an_iteration_runs_the_backward_into_fresh_gradients():
    """iteration(): in train mode the forward and its backward (of the loss, or of the gradients
    the program fed its outputs), each into fresh .grad tensors, so that gradients a run's
    results already hold are never added to; in eval no graph for a backward."""
    import torch
    from parity_capture.runs import iteration
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4, requires_grad=True)
    fresh = [*lin.parameters(), x]
    step = iteration(lambda t: (lin(t).pow(2).sum(), lin(t)), [x], True, (), fresh)
    step()
    held = lin.weight.grad.detach()  # what a run's results hold: an alias of .grad
    first = held.clone()
    step()
    step()
    torch.testing.assert_close(held, first)  # not added to
    torch.testing.assert_close(lin.weight.grad, first)  # each backward its own
    assert x.grad is not None
    # The gradients the program fed: the backward of the outputs that take one...
    lin.weight.grad = None
    iteration(lambda t: (lin(t), t.detach()), [x], True, [torch.ones(2, 3), torch.ones(2, 4)], fresh)()
    torch.testing.assert_close(lin.weight.grad, torch.ones(3, 2) @ x.detach())
    # ...and none where no output that needs one has one (standalone.train_results: no backward).
    lin.weight.grad = None
    iteration(lambda t: (lin(t), t.detach()), [x], True, [None, torch.ones(2, 4)], fresh)()
    assert lin.weight.grad is None
    assert not iteration(lin, [x], False)().requires_grad


def test_a_python_backends_timed_train_runs_leave_its_results_as_the_first_run_made_them(tmp_path):
    """A train run's timed iterations (each with its backward) after its results: the results
    the same as a run without them."""
    import torch
    from safetensors.torch import load_file
    from parity_capture import capture
    from parity_capture.backends import python_backends
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    d = str(tmp_path / "train")
    capture(model, (torch.randn(5, 8),), d, mode="train", loss_fn=lambda out: out.pow(2).mean())
    got = {}
    for n in (1, 3):
        out = str(tmp_path / f"out{n}.safetensors")
        r = python_backends.run({"repro": d, "backend": "aot_eager", "mode": "train", "device": "cpu",
                                 "iterations": n, "out": out})
        assert len(r["run_times_s"]) == n - 1 and r["compile_time_s"] > 0
        got[n] = load_file(out)
    assert any(k.startswith("grad/") for k in got[1]) and got[1].keys() == got[3].keys()
    for k in got[1]:
        torch.testing.assert_close(got[3][k], got[1][k], rtol=0, atol=0, msg=k)
