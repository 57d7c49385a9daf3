"""parity minify end to end: injected wrong values, exceptions and crashes in one op of a 305-op
graph reduce to that op with the original signature; two bugs reduce to the one that matches;
PyTorch's inductor minifier-testing knob reduces to the relu and, inside Inductor, to the relu's
lowering; a wrong pass an --import'ed plugin registers is named; outputs, --check, resume, graph
bisection and a repro that does not fail. (A train graph, the README's verify-to-minify workflow
and a hanging candidate: test_minify_workflows.py.)"""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import call_functions, minify, run_parity, standalone_env

sys.path.insert(0, os.path.dirname(__file__))
from deep_model import capture_deep  # noqa: E402
from relu_model import RELU_KNOB, capture_relu  # noqa: E402


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    return capture_deep(str(tmp_path_factory.mktemp("deep") / "deep"))


@pytest.fixture(scope="module")
def relunet(tmp_path_factory):
    # A (64, 256) input: the shrink-shapes pass makes the minimal repro small in data too.
    return capture_relu(str(tmp_path_factory.mktemp("relu") / "relunet"), batch=64, width=256)


@pytest.fixture(scope="module")
def relu_knob(parity_bin, relunet, tmp_path_factory):
    """The relu knob's wrong values minified as a user runs it (-j 2; the divergence scan finds the
    culprit): one run, read by the tests of its reduction, its culprit and its scan."""
    out = tmp_path_factory.mktemp("relu-knob") / "scan"
    r, s = minify(parity_bin, relunet, out, *RELU_KNOB, "-j", "2")
    return r, s, out


def input_shapes(repro_dir):
    with open(os.path.join(repro_dir, "graphs", "graph_0.json")) as f:
        nodes = json.load(f)["nodes"]
    return [n["meta"]["val"][0]["shape"] for n in nodes if n["op"] == "placeholder"]


def test_deep_graph_has_300_nodes(deep):
    g = json.load(open(os.path.join(deep, "graphs", "graph_0.json")))
    assert sum(n["op"] == "call_function" for n in g["nodes"]) >= 300


@pytest.mark.parametrize("kind,signature", [("perturb", "accuracy"), ("raise", "exception"), ("segfault", "crash")])
def test_one_faulty_op_reduces_to_that_op(parity_bin, deep, tmp_path, kind, signature):
    r, s = minify(parity_bin, deep, tmp_path, "--backend", "fault", "--backend-option", "op=aten::tanh",
                  "--backend-option", f"kind={kind}", "-j", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["signature"]["kind"] == signature
    ops = call_functions(s)
    assert len(ops) <= 3 and "aten::tanh" in ops, s["graph_text"]
    assert s["culprit"]["target"] == "aten::tanh" and "deep_model.py" in s["culprit"]["stack_trace"]
    assert s["first_failing_stage"] == "fault"
    # The candidates run in each slot's job server; one that crashed took its server down, and a
    # fresh one ran the next candidate.
    if signature == "crash":
        assert s["runners_started"] > 2, s["runners_started"]
    else:
        assert s["runners_started"] == 2, s["runners_started"]  # -j 2: both slots' runners, no replacement
    # No compiler subsystem can explain it: said so, in the summary and the terminal.
    assert "fault is no torch.compile backend" in s["compiler_culprit"]["sentence"], s["compiler_culprit"]
    assert "compiler culprit: fault is no torch.compile backend" in r.stdout, r.stdout
    # The minified dir reproduces the same failure with the backend.
    again = run_parity(parity_bin, "repro", "run", s["minified_dir"], "--backend", "fault")
    expected = {"accuracy": "FAIL", "exception": "EXCEPTION_RAISED"}.get(signature)
    if expected:
        assert again.returncode == 1 and expected in again.stdout, again.stdout + again.stderr


def test_two_bugs_reduce_to_the_one_matching_the_signature(parity_bin, deep, tmp_path):
    # tanh gives a wrong value; sigmoid (later) raises. The original fails by the exception, so
    # candidates that keep only the tanh bug (an accuracy failure) must be rejected.
    r, s = minify(parity_bin, deep, tmp_path, "--backend", "fault", "--backend-option", "op=aten::tanh",
                  "--backend-option", "op2=aten::sigmoid", "--backend-option", "kind2=raise")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["signature"]["kind"] == "exception" and "sigmoid" in s["signature"]["message"]
    ops = call_functions(s)
    assert "aten::sigmoid" in ops and "aten::tanh" not in ops and len(ops) <= 3


def check_relu_reduction(r, s, signature):
    """A relu knob's minify: the relu alone, inside Inductor its lowering, its input shrunk."""
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["signature"]["kind"] == signature
    assert call_functions(s) == ["aten::relu"], s["graph_text"]
    # Inside Inductor: the relu's lowering (falling back to ATen removes the failure).
    c = s["compiler_culprit"]
    assert (c["backend"], c["subsystem"], c["detail"]) == ("inductor", "lowerings", "relu"), c
    assert "inside inductor: lowerings #" in r.stdout and "(relu): falling back to ATen" in r.stdout, r.stdout
    # The relu's (64, 256) input is shrunk, and the smaller repro still fails the same way.
    (shape,) = input_shapes(s["minified_dir"])
    assert shape[0] * shape[1] < 64 * 256, shape
    assert any(p["pass"] in ("collapse-dims", "shrink-shapes") and p["accepted"] > 0 for p in s["passes"]), s["passes"]


def test_inductor_relu_bug_knob_reduces_to_the_relu(relu_knob, tmp_path):
    r, s, _ = relu_knob
    check_relu_reduction(r, s, "accuracy")
    # The standalone script needs only torch and safetensors, and shows the failure.
    env = standalone_env(tmp_path)
    p = subprocess.run([sys.executable, os.path.join(s["minified_dir"], "repro.py")], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
    assert "# compiler culprit: inside inductor: lowerings" in open(os.path.join(s["minified_dir"], "repro.py")).read()


# runtime_error reaches the same exception path as compile_error, at 5x its cost (160 s): left out
# to keep the suite inside its budget.
def test_inductor_relu_compile_error_knob_reduces_to_the_relu(parity_bin, relunet, tmp_path):
    r, s = minify(parity_bin, relunet, tmp_path, "--backend", "inductor", "--backend-option",
                  "cpp.inject_relu_bug_TESTING_ONLY=compile_error", "-j", "2")
    check_relu_reduction(r, s, "exception")


def test_a_wrong_pass_an_imported_plugin_registers_is_named(parity_bin, relunet, tmp_path):
    """--import reaches every process that compiles: a plugin's wrong post-grad pass makes the
    graph fail, and the compiler bisection names that pass and the config line removing it."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([parity_bin, "minify", relunet, "--out", str(tmp_path), "--backend", "inductor",
                        "--import", "wrong_post_grad_pass", "--no-scan", "--no-stage-bisect"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "summary.json"))
    c = s["compiler_culprit"]
    assert (c["subsystem"], c["detail"]) == ("post_grad_passes", "post_grad_custom_post_pass"), c
    assert c["config"] == "torch._inductor.config.post_grad_custom_post_pass = None", c
    script = open(os.path.join(s["minified_dir"], "repro.py")).read()
    assert "import wrong_post_grad_pass" in script and "post_grad_custom_post_pass = None" in script
    # Without the plugin the same graph passes: the failure is the plugin's.
    r = run_parity(parity_bin, "repro", "run", s["minified_dir"], "--backend", "inductor")
    assert r.returncode == 0, r.stdout + r.stderr


def test_runners_kept_across_candidates_judge_as_fresh_children_do(parity_bin, relunet, tmp_path):
    """The same minify with one job server for every candidate and with a fresh child per
    candidate (--fresh-runners): the same verdicts, so the same reduction and culprit. (A C++
    backend: what is compared is how candidates run, which a compile would only make slower.)"""
    fault = ["--backend", "fault", "--backend-option", "op=aten::relu"]
    r1, kept = minify(parity_bin, relunet, tmp_path / "kept", *fault)
    r2, fresh = minify(parity_bin, relunet, tmp_path / "fresh", *fault, "--fresh-runners")
    assert r1.returncode == 0 and r2.returncode == 0, r1.stdout + r1.stderr + r2.stdout + r2.stderr
    assert kept["runners_started"] == 1 and fresh["runners_started"] == 0
    for key in ("graph_text", "signature", "backend_runs", "culprit"):
        assert kept[key] == fresh[key], (key, kept[key], fresh[key])


def test_divergence_scan_finds_the_bisections_culprit_in_fewer_runs(parity_bin, relunet, relu_knob, tmp_path):
    r, scan, scan_out = relu_knob
    assert r.returncode == 0, r.stdout + r.stderr
    r, bis = minify(parity_bin, relunet, tmp_path / "bisect", *RELU_KNOB, "-j", "2", "--no-scan", "--no-compiler-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    assert scan["localization"]["path"] == "scan" and bis["localization"]["path"] == "bisection"
    # The scan ran the graph's segments (-j 2: four, fewer where one would hold under 8 values),
    # -j at a time, up to the failing one
    segs = scan["localization"]["segments"]
    assert 2 <= segs["count"] <= 4 and segs["failing"] <= segs["run"] <= segs["count"], segs
    assert scan["culprit"]["node"] == bis["culprit"]["node"] and scan["culprit"]["target"] == "aten::relu"
    # The divergence map: every floating value, the first failing one the culprit, its error far
    # outside the fp64 envelope eager's error sets (the values before it inside it).
    dmap = scan["divergence"]
    first = next(e for e in dmap if not e["pass"])
    assert first["node"] == scan["culprit"]["node"]
    assert first["error_ratio"] > 100 and all(e["error_ratio"] < 10 for e in dmap[:dmap.index(first)])
    assert "divergence" not in bis
    assert scan["backend_runs"] < bis["backend_runs"], (scan["backend_runs"], bis["backend_runs"])
    assert scan["seconds_per_backend_run"] > 0
    # Where the time went, step by step in the order they ran (the terminal's "time:" line too).
    steps = [s["step"] for s in scan["step_seconds"]]
    assert steps[:4] == ["reference_values", "run_ahead", "confirm", "stage_bisect"], steps
    assert "divergence_scan" in steps and "node_bisect" not in steps
    assert "node_bisect" in [s["step"] for s in bis["step_seconds"]]
    assert sum(s["seconds"] for s in scan["step_seconds"]) <= scan["wall_time_s"]
    # The HTML report plots the map along the graph, for the scan's run only.
    html = tmp_path / "report.html"
    r = run_parity(parity_bin, "report", str(scan_out), str(tmp_path / "bisect" / "summary.json"), "-o", str(html))
    assert r.returncode == 0 and "2 minify runs" in r.stdout, r.stdout + r.stderr
    text = html.read_text()
    assert "<h2>Minify runs</h2>" in text and text.count("<svg") == 1 and "<script" not in text
    assert f"leaves the fp64 envelope at <code>%{first['node']}</code>" in text


class Attention(torch.nn.Module):
    """Attention trained as new code writes it: scaled_dot_product_attention with dropout under
    autocast, which the recorded graph holds as its math (a softmax between two matmuls)."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 4)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        return self.out(a.transpose(1, 2).reshape(2, 8, 16))


def test_a_culprit_cut_out_of_a_recorded_train_graph_is_differentiated_as_it_was(parity_bin, tmp_path):
    """A dump_backend dir names the inputs its train graph differentiates (the parameters, not the
    data); a value a candidate cuts into an input is differentiated where the original
    differentiated it, so the softmax alone, fed the gradient it got in the program's backward, is
    a train repro that fails the same way (it kept the 15 ops from a parameter to the softmax while
    its cut input was not differentiated: its reference's backward had nothing to differentiate)."""
    from parity_capture import dump_backend
    torch.manual_seed(0)
    torch._dynamo.reset()
    step = torch.compile(Attention(), backend=dump_backend(str(tmp_path / "attn")))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        step(torch.randn(2, 8, 16)).float().square().mean().backward()
    torch._dynamo.reset()
    r, s = minify(parity_bin, str(tmp_path / "attn"), tmp_path / "m", "--backend", "fault", "--backend-option",
                  "op=aten::_safe_softmax", "--backend-option", "delta=0.5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert call_functions(s) == ["aten::_safe_softmax"], s["graph_text"]
    assert "the culprit alone on its input values fails the same way" in r.stdout, r.stdout


def test_user_check_command(parity_bin, deep, tmp_path):
    # llvm-reduce's --test: exit 0 = still interesting. Here: "the graph still calls tanh".
    check = tmp_path / "check.sh"
    check.write_text("#!/bin/sh\ngrep -q '\"aten::tanh\"' \"$1\"/graphs/*.json\n")
    check.chmod(0o755)
    r, s = minify(parity_bin, deep, tmp_path / "out", "--backend", "eager", "--check", str(check), "--confirm", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert call_functions(s) == ["aten::tanh"]


def test_resume_from_checkpoint(parity_bin, deep, tmp_path):
    args = ["--backend", "fault", "--backend-option", "op=aten::tanh"]
    r1, s1 = minify(parity_bin, deep, tmp_path, *args)
    assert r1.returncode == 0 and os.path.exists(tmp_path / "state.json")
    r2, s2 = minify(parity_bin, deep, tmp_path, *args)
    assert r2.returncode == 0 and "resuming from" in r2.stdout
    assert call_functions(s2) == call_functions(s1)
    assert s2["backend_runs"] < s1["backend_runs"]


def test_repro_that_does_not_fail_is_reported(parity_bin, deep, tmp_path):
    r, s = minify(parity_bin, deep, tmp_path, "--backend", "eager")
    assert r.returncode == 1 and "does not fail" in r.stderr and s is None


def test_graph_bisection_finds_the_failing_graph(parity_bin, tmp_path):
    from parity_capture import dump_backend

    class TwoGraphs(torch.nn.Module):
        def forward(self, x):
            y = torch.sin(x) + 1
            torch._dynamo.graph_break()
            return torch.tanh(y) * 2

    out = str(tmp_path / "prog")
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(TwoGraphs(), backend=dump_backend(out, "two_graphs"))(torch.randn(4, 8))
    torch._dynamo.reset()
    r, s = minify(parity_bin, out, tmp_path / "min", "--backend", "fault", "--backend-option", "op=aten::tanh",
                  "--no-stage-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["graph"] == "graph_1" and "first failing graph: graph_1" in r.stdout
    assert call_functions(s) == ["aten::tanh"]


def test_bad_input(parity_bin, deep, tmp_path):
    r = run_parity(parity_bin, "minify", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr
    r = run_parity(parity_bin, "minify", deep)  # the capture names no backend
    assert r.returncode == 2 and "names no backend" in r.stderr
    r = run_parity(parity_bin, "minify", "--print-passes")
    assert r.returncode == 0 and "replace-with-placeholders" in r.stdout


def test_report_refuses_a_broken_minify_summary(parity_bin, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "summary.json").write_text(json.dumps({"source": "x", "backend": "inductor"}))
    r = run_parity(parity_bin, "report", str(tmp_path / "out"), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "summary.json" in r.stderr and '"ops_before"' in r.stderr, r.stderr
    assert not (tmp_path / "r.html").exists()
