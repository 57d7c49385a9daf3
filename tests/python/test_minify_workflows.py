"""parity minify end to end, the workflows beside test_minify.py's reductions: a train graph's
relu bug reduced to the relu and a sum loss (its repro.py reproducing standalone), the README's
workflow from a verify failure of a suite model to its minimal repro and report, and a hanging
candidate killed with its runner replaced. (Split from test_minify.py so that neither file's
ctest entry holds most of the suite's longest tests.)"""
import json
import os
import subprocess
import sys

import torch

from conftest import call_functions, minify, run_parity, standalone_env

sys.path.insert(0, os.path.dirname(__file__))
from relu_model import RELU_KNOB, capture_relu  # noqa: E402


class Tiny(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x * 2) + 1


def test_a_hanging_candidate_is_killed_and_its_runner_replaced(parity_bin, tmp_path):
    from parity_capture import capture
    capture(Tiny(), (torch.randn(4, 4),), str(tmp_path / "tiny"))
    r, s = minify(parity_bin, str(tmp_path / "tiny"), tmp_path / "m", "--backend", "fault", "--backend-option", "op=aten::tanh",
                  "--backend-option", "kind=hang", "--timeout", "3", "--confirm", "1", "--no-stage-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["signature"]["kind"] == "timeout" and call_functions(s) == ["aten::tanh"], s["graph_text"]
    assert s["runners_started"] > 1, s["runners_started"]  # each hang took its server down


def test_train_relu_bug_reduces_to_the_relu_fed_the_gradient_the_original_gave_it(parity_bin, tmp_path):
    """--test train: the relu alone, its backward fed the gradient it got in the original's (no
    made-up loss), the relu named as the culprit with the test model's own source line."""
    src = capture_relu(str(tmp_path / "relutrain"), blocks=2, mode="train")  # the relu in the last block: 14 ops
    r, s = minify(parity_bin, src, tmp_path / "out", *RELU_KNOB, "-j", "2", "--no-compiler-bisect", "--no-stage-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["signature"]["kind"] == "accuracy"
    ops = call_functions(s)
    assert "aten::relu" in ops and len(ops) <= 3, s["graph_text"]
    assert s["culprit"]["target"] == "aten::relu"
    assert "relu_model.py" in s["culprit"]["stack_trace"] and "capture.py" not in s["culprit"]["stack_trace"]
    assert "    at relu_model.py:" in r.stdout, r.stdout  # the log names the model's own line (innermost frame)
    again = run_parity(parity_bin, "repro", "run", s["minified_dir"], *RELU_KNOB)
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout + again.stderr
    # The standalone script runs the train graph as parity does (forward and backward from fresh
    # parameters, the loss and every gradient compared): a failure only in gradients reproduces.
    env = standalone_env(tmp_path)
    p = subprocess.run([sys.executable, os.path.join(s["minified_dir"], "repro.py")], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
    assert "output/0: FAIL" in p.stdout and "grad/" in p.stdout, p.stdout
    tangents = json.load(open(os.path.join(s["minified_dir"], "manifest.json")))["graphs"][0]["tangents"]
    assert len(tangents) == 1 and tangents[0].startswith("vjp/"), tangents


def test_from_verify_failure_to_minimal_repro(parity_bin, tmp_path):
    # The README workflow on a real suite model (BatchNorm: tuple ops and getitem nodes).
    v = run_parity(parity_bin, "verify", "--model", "resnet", *RELU_KNOB, "--output-dir", str(tmp_path / "v"),
                   "--cache-dir", str(tmp_path / "cache"))
    assert v.returncode == 1 and "FAIL" in v.stdout, v.stdout + v.stderr
    repro = tmp_path / "v" / "repros" / "resnet-inductor-eval-float32-cpu"
    r, s = minify(parity_bin, str(repro), tmp_path / "m", "-j", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert s["ops_before"] > 60 and call_functions(s) == ["aten::relu"]
    assert s["culprit"]["module_path"].startswith("stem")
    # The HTML report shows where inside the compiler it comes from.
    rep = run_parity(parity_bin, "report", str(tmp_path / "m"), "-o", str(tmp_path / "r.html"))
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "compiler: inside inductor: lowerings #" in (tmp_path / "r.html").read_text()
