"""load_graph (tools/parity_capture/runs.py): a worker request's one graph, read alone."""
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
