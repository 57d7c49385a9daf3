"""parity minify of multi-rank dirs (docs/distributed.md), 2 ranks of a gloo group on the CPU: a
failing rank of a tensor-parallel block isolated and reduced to the relu, and a failure that needs
its collectives reduced on every rank with them kept. (Split from test_distributed.py so that
neither file's ctest entry holds most of the suite's longest tests; this file captures only the
two programs it minifies.)"""
import json
import os
import subprocess
import sys

import pytest

from conftest import run_parity, standalone_env

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_programs import capture  # noqa: E402
from relu_model import RELU_KNOB  # noqa: E402


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    base = tmp_path_factory.mktemp("two")
    capture("collectives,tp", 2, base)
    return base


@pytest.fixture(scope="module")
def collectives2(two_ranks):
    return two_ranks / "collectives"


def test_minify_isolates_a_failing_rank_of_a_tp_block_and_reduces_it_to_the_relu(parity_bin, two_ranks, tmp_path):
    """Inductor's relu knob inside a tensor-parallel block (trained): each rank isolated (its
    all_reduce cut, the values it returned fed in), the first failing rank minified to the relu,
    with no collective left, and its repro.py runs in one process; the other rank's isolated dir
    fails the same way."""
    out = tmp_path / "m"
    r = run_parity(parity_bin, "minify", str(two_ranks / "tp"), "--out", str(out), *RELU_KNOB, "-j", "2", "--no-compiler-bisect",
                   "--no-stage-bisect", "--confirm", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(out / "summary.json"))
    # (Twice in the suite under load, never alone: once the minimum kept 6 ops, once no rank failed
    # isolated and the ranks were reduced together. The minify's log says which runs passed.)
    w = s["world"]
    assert (w["rank"], w["world_size"]) == (0, 2) and w.get("collectives_cut", 0) >= 1, json.dumps(w) + "\n" + r.stdout
    ops = [c["target"] for c in s["culprit_ops"]]
    assert "aten::relu" in ops and len(ops) <= 3 and s["culprit"]["target"] == "aten::relu", \
        s["graph_text"] + "\n" + json.dumps(s["passes"]) + "\n" + r.stdout
    assert "_c10d_functional" not in s["graph_text"]
    p = subprocess.run([sys.executable, os.path.join(s["minified_dir"], "repro.py")], capture_output=True, text=True,
                       env=standalone_env(tmp_path))
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
    isolated1 = out / "isolated" / "rank1"
    assert "distributed" not in json.load(open(isolated1 / "manifest.json"))
    r = run_parity(parity_bin, "repro", "run", str(isolated1), *RELU_KNOB)
    assert r.returncode == 1 and "FAIL" in r.stdout, r.stdout + r.stderr


def test_a_failure_that_needs_its_collectives_is_reduced_on_every_rank_with_them_kept(parity_bin, collectives2, tmp_path):
    """Inductor with a wrong communication pass (wrong_comm_pass.py: a post-grad pass running every
    sum all_reduce as an average) fails every rank only where the collectives run: no rank fails
    isolated, so minify reduces the graph on both ranks at once (minifier/across_ranks.h), each
    candidate run for real on 2 gloo ranks. The minimum keeps the all_reduce and drops every
    collective the failure does not need; the stages before Inductor pass, and PyTorch's compiler
    bisector, run by both ranks in step, names the pass; its repro.py reproduces under torchrun,
    and simulated (parity's own collectives) it passes. `--out` is relative, as a user types it:
    the ranks' requests name their store and outputs by absolute paths."""
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "m"
    r = subprocess.run([parity_bin, "minify", str(collectives2), "--out", "m", "--backend", "inductor",
                        "--import", "wrong_comm_pass", "--confirm", "1"], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(out / "summary.json"))
    # Stage bisection on every rank: dynamo alone, AOTAutograd and its decompositions pass.
    assert s["stages"] == {"stage": "inductor", "passed": ["eager", "aot_eager", "aot_eager_decomp_partition"]}, s["stages"]
    c = s["compiler_culprit"]
    assert (c["subsystem"], c["detail"]) == ("post_grad_passes", "post_grad_custom_post_pass"), c
    assert c["config"] == "torch._inductor.config.post_grad_custom_post_pass = None", c
    assert "compiler culprit (every rank in step): inside inductor: post_grad_passes" in r.stdout, r.stdout
    w = s["world"]
    assert w["reduced_across_ranks"] and w["rank"] == 0 and w["world_size"] == 2, w
    assert [t["fails"] for t in w["ranks_tried"]] == [False, False], w
    kept = w["collectives_kept"]
    assert any("all_reduce" in k for k in kept), s["graph_text"]
    assert not [k for k in kept if "all_reduce" not in k and "wait_tensor" not in k], s["graph_text"]
    assert s["ops_after"] <= 3 < s["ops_before"], s["graph_text"]
    assert s["culprit"]["target"] == "_c10d_functional::all_reduce" and "dist_programs.py" in s["culprit"]["stack_trace"], s
    ranks = [json.load(open(out / "world" / f"rank{k}" / "manifest.json"))["distributed"]["rank"] for k in (0, 1)]
    assert ranks == [0, 1]
    # repro.py is standalone (torch and safetensors: standalone_ranks.py inlined) and imports the plugin itself.
    script = open(out / "repro.py").read()
    assert "parity_capture" not in script and "import wrong_comm_pass" in script and "def torchrun_main(" in script
    assert "# compiler culprit: inside inductor: post_grad_passes" in script
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(out / "repro.py")], capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode != 0 and "rank 0: graph_0 output 0: FAIL" in p.stdout, p.stdout + p.stderr
    r = run_parity(parity_bin, "repro", "run", str(out / "world"))
    assert r.returncode == 0 and "PASS: 2 ranks, simulated replay" in r.stdout, r.stdout + r.stderr
