"""Hostile higher-order-op graphs (issue 44): a cond, a while_loop and a scan program captured,
then each mutated one way. What the file alone shows cannot hold is bad input everywhere (exit 2
naming the graph, the node and the field: `repro run`, and `verify`, which sets the dir aside,
never a verdict); a loop that never ends stops at its bound (derived from the iterations the
capture recorded) with an error naming the node, never a hang; the valid files pass."""
import json
import os
import shutil

import pytest
import torch

from conftest import run_parity
from parity_capture import capture
from test_hops import CondNet, Loop, Recurrent


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hostile")
    return {"cond": capture(CondNet(), (torch.randn(8, 16),), str(root / "cond")),
            "while": capture(Loop(), (torch.randn(4, 8),), str(root / "while")),
            "scan": capture(Recurrent(), (torch.randn(2, 8), torch.randn(5, 2, 8)), str(root / "scan"))}


def hop(g):
    return next(n for n in g["nodes"] if n.get("target", "").startswith("hop::"))


def node(g, name):
    return next(n for n in g["nodes"] if n["name"] == name)


def sub(g, name):
    return g["subgraphs"][name]


def out_args(sg):
    """The list a subgraph's output returns (one value becomes a list of one)."""
    out = next(n for n in sg["nodes"] if n["op"] == "output")
    if not isinstance(out["args"][0], list):
        out["args"][0] = [out["args"][0]]
    return out["args"][0]


def f32(shape):
    return [{"dtype": "float32", "shape": shape, "stride": [1] * len(shape)}]


# name: (program, mutation of its graph JSON, text the error names)
def _branch_shape(g):  # the untaken branch returns another shape than the op's recorded one
    node(sub(g, "false_graph_0"), "sin")["meta"]["val"] = f32([4, 4])


def _forever(g):  # a condition that never turns false (the file is valid: it is the run that never ends)
    lt = next(n for n in sub(g, "while_loop_cond_graph_0")["nodes"] if n.get("target", "").startswith("aten::lt"))
    lt["target"], lt["args"][1] = "aten::gt.Scalar", -1


MUTATIONS = {
    "cond-tensor-where-a-subgraph-belongs": ("cond", lambda g: hop(g)["args"].__setitem__(1, {"node": "tanh"}), "expected a subgraph"),
    "cond-three-operands-for-one": ("cond", lambda g: hop(g)["args"][3].extend([{"node": "tanh"}, {"node": "tanh"}]),
                                    "takes 1 operands, the call gives it 3"),
    "cond-no-operands": ("cond", lambda g: hop(g)["args"].__setitem__(3, []), "takes 1 operands, the call gives it 0"),
    "unknown-hop": ("cond", lambda g: hop(g).__setitem__("target", "hop::teleport"), "hop::teleport is no higher-order op"),
    "cond-no-arguments": ("cond", lambda g: hop(g).__setitem__("args", []), "takes 4 arguments"),
    "cond-float-tensor-predicate": ("cond", lambda g: hop(g)["args"].__setitem__(0, {"node": "x"}), "the predicate must be a bool"),
    "cond-string-predicate": ("cond", lambda g: hop(g)["args"].__setitem__(0, "yes"), "the predicate must be a bool"),
    "cond-untaken-branch-shape": ("cond", _branch_shape, "the false branch returns float32[4, 4]"),
    "while-condition-returns-two": ("while", lambda g: out_args(sub(g, "while_loop_cond_graph_0")).append({"node": "arg0_1"}),
                                    "the condition returns 2 values"),
    "while-condition-returns-a-tensor": ("while", lambda g: out_args(sub(g, "while_loop_cond_graph_0")).__setitem__(0, {"node": "arg1_1"}),
                                         "the condition's value must be a bool"),
    "while-body-returns-fewer": ("while", lambda g: out_args(sub(g, "while_loop_body_graph_0")).pop(),
                                 "the body returns 1 values for 2 carried ones"),
    "scan-init-does-not-fit": ("scan", lambda g: hop(g)["args"][1].append({"node": "h0"}), "takes 3 operands, the call gives it 4"),
    "scan-slices-do-not-fit": ("scan", lambda g: node(g, "xs")["meta"].__setitem__("val", f32([5, 2, 9])), "does not fit"),
    "scan-combine-returns-fewer": ("scan", lambda g: out_args(sub(g, "scan_combine_graph_0")).clear(),
                                   "fewer than the 1 of the carry"),
    "scan-combine-carry-shape": ("scan", lambda g: node(sub(g, "scan_combine_graph_0"), "tanh")["meta"].__setitem__("val", f32([2, 9])),
                                 "returns float32[2, 9] as value 0"),
}


def write(src, dst, mutate):
    shutil.copytree(src, dst)
    path = os.path.join(dst, "graphs", "graph_0.json")
    g = json.load(open(path))
    mutate(g)
    json.dump(g, open(path, "w"))
    return str(dst)


def test_the_valid_files_pass_and_record_their_loops(parity_bin, programs):
    for name, d in programs.items():
        r = run_parity(parity_bin, "repro", "run", d)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
    g = json.load(open(os.path.join(programs["while"], "graphs", "graph_0.json")))
    assert hop(g)["meta"]["iterations"] == 4  # Loop counts to 4


def test_what_the_file_shows_cannot_hold_is_bad_input_everywhere(parity_bin, programs, tmp_path):
    dirs = {name: write(programs[prog], tmp_path / name, mutate) for name, (prog, mutate, _) in MUTATIONS.items()}
    for name, d in dirs.items():
        r = run_parity(parity_bin, "repro", "run", d)
        text = MUTATIONS[name][2]
        assert r.returncode == 2 and text in r.stderr and "graph_0.json" in r.stderr, (name, r.stdout, r.stderr)
    # verify sets each aside as bad input (exit 2, each named), no record, no verdict.
    r = run_parity(parity_bin, "verify", *dirs.values(), "--backend", "eager", "--output-dir", str(tmp_path / "out"))
    assert r.returncode == 2, r.stdout + r.stderr
    for name, d in dirs.items():
        assert d in r.stdout + r.stderr, name
    assert not os.path.exists(tmp_path / "out" / "results.jsonl") or not open(tmp_path / "out" / "results.jsonl").read()


def test_a_loop_that_never_ends_stops_at_its_bound(parity_bin, programs, tmp_path):
    d = write(programs["while"], tmp_path / "forever", _forever)
    r = run_parity(parity_bin, "repro", "run", d)  # the bound from the recorded 4 iterations: 1024
    assert r.returncode == 1 and "while_loop did not end within 1024 iterations (the program ran it 4 times" in r.stdout, r.stdout
    r = run_parity(parity_bin, "repro", "run", d, "--while-limit", "10")
    assert r.returncode == 1 and "within 10 iterations (--while-limit)" in r.stdout, r.stdout
    r = run_parity(parity_bin, "verify", d, "--backend", "eager", "--output-dir", str(tmp_path / "out"), "--while-limit", "10")
    rec = json.loads(open(tmp_path / "out" / "results.jsonl").readline())
    assert rec["verification_code"] == "EAGER_FAILED" and "node \"while_loop\"" in rec["error"], rec
