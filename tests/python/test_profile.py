"""`parity profile` end to end on the CPU: a suite model's capture profiled with Inductor (the
categories, every kernel mapped to graph nodes, the trace, the records), and --kernel."""
import csv
import json
import os
import re
import subprocess

import pytest

from conftest import run_parity


@pytest.fixture(scope="module")
def llama(parity_bin, test_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("profile")
    r = run_parity(parity_bin, "profile", f"{test_data}/models/llama", "--backend", "inductor", "--json",
                   "--iterations", "10", "--profile-iterations", "3", "--trace", str(out / "trace.json"),
                   "--output-dir", str(out / "results"))
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout), out


def graph_nodes(test_data):
    with open(f"{test_data}/models/llama/graphs/graph_0.json") as f:
        return {n["name"] for n in json.load(f)["nodes"]}


def test_categories_share_the_whole_time(llama):
    report, _ = llama
    cats = report["breakdown"]["categories"]
    assert {c["category"] for c in cats} <= {"pointwise", "reduction", "persistent_reduction", "template", "extern", "other"}
    assert sum(c["share"] for c in cats) == pytest.approx(1.0, abs=1e-6)
    assert sum(r["share"] for r in report["breakdown"]["rows"]) == pytest.approx(1.0, abs=1e-6)
    assert any(c["category"] == "extern" and c["share"] > 0 for c in cats)  # llama's matmuls
    assert any(c["category"] == "pointwise" and c["kernels"] > 0 for c in cats)


def test_every_kernel_maps_to_graph_nodes_and_a_model_line(llama, test_data):
    report, _ = llama
    assert report["provenance"] is True
    nodes = graph_nodes(test_data)
    kernels = [r for r in report["breakdown"]["rows"] if r["kernel"]]
    assert len(kernels) >= 5
    for row in kernels:
        assert row["nodes"], f"{row['name']} maps to no graph node"
        assert set(row["nodes"]) <= nodes, row
    # The model lines come from the capture's stack traces (transformers' modeling_llama.py).
    assert any(re.match(r"modeling_llama\.py:\d+ ", r["source"]) for r in kernels), [r["source"] for r in kernels]


def test_trace_opens_as_chrome_json_with_eager_and_backend(llama):
    _, out = llama
    with open(out / "trace.json") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    procs = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert any(p.startswith("eager") for p in procs) and any(p.startswith("backend inductor") for p in procs), procs
    names = {e.get("name", "") for e in events if e.get("ph") == "X"}
    assert any("cpp_fused" in n for n in names)  # Inductor's C++ kernels
    assert "aten::mm" in names or "aten::addmm" in names or "aten::linear" in names


def test_records_carry_speed_as_the_runner_reports_it(llama):
    report, out = llama
    with open(out / "results" / "results.jsonl") as f:
        records = [json.loads(line) for line in f]
    assert len(records) == 1 and records[0]["kind"] == "profile"
    speed = records[0]["profile"]["speed"]
    assert speed["eager"]["median_ms"] > 0 and speed["backend"]["median_ms"] > 0
    assert speed["speedup"] == pytest.approx(speed["eager"]["median_ms"] / speed["backend"]["median_ms"])
    assert speed["compile_s"] > 0 and speed["eager"]["samples"] == 10
    with open(out / "results" / "performance.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency",
                             "compression_ratio", "eager_peak_mem", "dynamo_peak_mem"]
    assert rows[0]["dev"] == "cpu" and rows[0]["name"] == "llama" and float(rows[0]["abs_latency"]) > 0


def test_train_maps_backward_kernels_to_the_forward_nodes_and_runs_one_alone(parity_bin, tmp_path):
    """A train step's backward graph comes from autograd, not from the captured graph; its kernels
    still map to the captured nodes they differentiate. --kernel runs one kernel alone (its time
    and the bytes it moves); a name the run does not generate is exit 2 listing those it does."""
    common = ["--model", "mlp", "--test", "train", "--cache-dir", str(tmp_path / "cache"),
              "--iterations", "3", "--profile-iterations", "1", "--output-dir", str(tmp_path / "o"), "--json"]
    r = run_parity(parity_bin, "profile", *common)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [row for row in json.loads(r.stdout)["breakdown"]["rows"] if row["kernel"]]
    backward = [row for row in rows if row["phase"] == "backward"]
    assert backward and any(row["phase"] == "forward" for row in rows), rows
    for row in rows:
        assert row["nodes"], f"{row['phase']} {row['name']} maps to no graph node"
    # The MLP's gelu gradient kernels point at its gelu nodes and at models.py's line.
    gelu_bwd = [row for row in backward if "gelu_backward" in row["kernel"]]
    assert gelu_bwd and all(any(n.startswith("gelu") for n in row["nodes"]) for row in gelu_bwd), backward
    assert any(row["source"].startswith("models.py:") for row in gelu_bwd), gelu_bwd
    name = gelu_bwd[0]["kernel"]
    bad = run_parity(parity_bin, "profile", *common, "--kernel", "no_such_kernel")
    assert bad.returncode == 2 and "no generated kernel of that name" in bad.stderr, bad.stdout + bad.stderr
    assert f"backward:{name}" in re.search(r"kernels: (.*)\)", bad.stderr).group(1).split(", "), bad.stderr
    r = run_parity(parity_bin, "profile", *common, "--kernel", f"backward:{name}")
    assert r.returncode == 0, r.stdout + r.stderr
    bench = json.loads(r.stdout)["kernel_bench"]
    assert bench["phase"] == "backward" and bench["name"] == name and bench["nodes"] and len(bench["runs"]) == 1
    run = bench["runs"][0]
    assert all(t > 0 for t in run["times_ms"]) and run["bytes"] > 0


def test_bad_input_is_exit_2_before_anything_runs(parity_bin, test_data, tmp_path):
    mlp = f"{test_data}/models/mlp"
    r = run_parity(parity_bin, "profile", mlp, "--backend", "torchscript")
    assert r.returncode == 2 and "torch.compile" in r.stderr, r.stderr
    r = run_parity(parity_bin, "profile", mlp, "--iterations", "0")
    assert r.returncode == 2 and "--iterations" in r.stderr
    r = run_parity(parity_bin, "profile", mlp, "--kernel-option", "max_autotune=True")
    assert r.returncode == 2 and "--kernel" in r.stderr
    r = run_parity(parity_bin, "profile", mlp, "--kernel", "k", "--kernel-option", "max_autotune")
    assert r.returncode == 2 and '--kernel-option "max_autotune": expected' in r.stderr, r.stderr


def test_html_report_shows_categories_and_top_kernels(parity_bin, llama, tmp_path):
    report, out = llama
    html = tmp_path / "report.html"
    r = run_parity(parity_bin, "report", str(out / "results"), "-o", str(html))
    assert r.returncode == 0 and "1 profiles" in r.stdout, r.stdout + r.stderr
    text = html.read_text()
    assert "<h2>Profiles</h2>" in text and "<script" not in text
    assert "share of the compiled run" in text  # the category bar chart (inline SVG)
    top = report["breakdown"]["rows"][0]["name"]
    assert f"<code>{top}</code>" in text


BAD_BACKENDS = '''
import os, time
from torch._dynamo import register_backend

@register_backend
def aborts(gm, example_inputs):
    os.abort()

@register_backend
def hangs(gm, example_inputs):
    time.sleep(600)
'''


# The hang waits out its timeout (kept short); the abort's is never reached (kept long: a busy
# machine's slow start must not turn the abort into a timeout).
@pytest.mark.parametrize("backend,how,timeout", [("aborts", "signal 6", "120"), ("hangs", "timeout", "6")])
def test_a_crashing_or_hanging_backend_ends_the_child_not_parity(parity_bin, test_data, tmp_path, backend, how, timeout):
    (tmp_path / "bad_backends.py").write_text(BAD_BACKENDS)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([parity_bin, "profile", f"{test_data}/models/mlp", "--backend", f"torch_compile:{backend}",
                        "--import", "bad_backends", "--iterations", "2", "--timeout", timeout, "--output-dir", str(tmp_path / "o")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"profiling child (backend {backend}) ended ({how}" in r.stderr, r.stderr


def test_provenance_phase_is_the_aot_graphs_not_the_partitioners_tags():
    """A train forward with batch norm holds nodes the partitioner tags is_backward; its kernels
    are still the forward's and map to its nodes, and the backward's map through seq_nr."""
    import torch
    from torch._inductor.utils import run_and_get_code
    from parity_capture.profiling.categories import generated_kernels
    from parity_capture.profiling.compile import _compile
    from parity_capture.profiling.provenance import Provenance
    from parity_capture import warm
    warm.pick_cpu_isa()  # as the profiling child does before it compiles with the caches off

    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    x = torch.randn(4, 8, requires_grad=True)
    prov = Provenance()
    compiled, config = _compile(torch.fx.symbolic_trace(net), "inductor", {}, profiling=True)
    with config(), prov.collecting():
        _, codes = run_and_get_code(lambda: compiled(x).sum().backward())
    kernels = generated_kernels(codes)
    assert kernels["forward"] and kernels["backward"], kernels
    for phase in ("forward", "backward"):
        mapped = [k for k in kernels[phase] if prov.nodes(k, phase)["nodes"]]
        assert mapped, (phase, kernels[phase], prov.kernel_to_post)
    # The batch norm kernels, forward and backward, map to the batch norm's node (Sequential's "1").
    for phase in ("forward", "backward"):
        bn = [k for k in kernels[phase] if "batch_norm" in k]
        assert bn and all("_1" in prov.nodes(k, phase)["nodes"] for k in bn), (phase, bn)
