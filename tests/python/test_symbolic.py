"""Symbolic shapes end to end (docs/format.md, docs/verify.md --shapes, docs/minify.md): programs
that call their compiled model with several shapes leave graphs with SymInt inputs and size
expressions; every one of them verifies, at the recorded shape and across its ranges; a
size-specific backend bug is found at its size; a symbolic graph minifies to a graph whose symbols
are still bound, and its repro.py replays it."""
import json
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch

from conftest import run_parity, stamp_version, standalone_env
from parity_capture import dump_backend
from parity_capture.dynamo_backend import ParityCaptureWarning


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.norm(self.fc(x)))
        # size arithmetic on the batch: a view to a computed size and back
        return self.head(h.reshape(-1).view(x.shape[0], 16))


def manifest(d):
    return json.load(open(os.path.join(str(d), "manifest.json")))


def graph_json(d, entry):
    return json.load(open(os.path.join(str(d), entry["file"])))


def dump(model, calls, out, **compile_kwargs):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=dump_backend(str(out)), **compile_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            results = calls(compiled)
    torch._dynamo.reset()
    return results, [w for w in caught if issubclass(w.category, ParityCaptureWarning)]


def verify(parity_bin, out, *args):
    r = run_parity(parity_bin, "verify", "--output-dir", str(out), *map(str, args))
    path = os.path.join(str(out), "results.jsonl")
    return r, ([json.loads(l) for l in open(path)] if os.path.exists(path) else [])


@pytest.fixture(scope="module")
def last_batch(tmp_path_factory):
    """A plain inference loop whose last batches are smaller: dynamo recompiles with a symbolic
    batch dimension."""
    torch.manual_seed(0)
    model = Net().eval()
    batches = [torch.randn(n, 8) for n in (8, 8, 5, 3)]
    d = tmp_path_factory.mktemp("lastbatch") / "prog"
    with torch.no_grad():
        want = [model(x) for x in batches]
    got, caught = dump(model, lambda f: [f(x) for x in batches], d)
    assert all(torch.equal(a, b) for a, b in zip(want, got))  # the capture changes nothing
    assert not caught, [str(w.message) for w in caught]
    return d


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("dynamic") / "prog"
    _, caught = dump(Net().eval(), lambda f: f(torch.randn(6, 8)), d, dynamic=True)
    assert not caught, [str(w.message) for w in caught]
    return d


def test_the_smaller_last_batch_program_records_a_symbolic_graph(last_batch):
    m = manifest(last_batch)
    assert m["version"] == 3 and not m.get("skipped_graphs")
    graphs = [graph_json(last_batch, e) for e in m["graphs"]]
    assert len(graphs) == 2, [e["name"] for e in m["graphs"]]
    static, symbolic = graphs
    assert not static.get("symbols")
    (sym,) = symbolic["symbols"]  # the batch
    assert symbolic["symbols"][sym]["hint"] == 5  # the call that recompiled
    x = next(n for n in symbolic["nodes"] if n["op"] == "placeholder" and "val" in n.get("meta", {}))
    assert x["meta"]["val"][0]["sym_shape"] == [sym, None]
    assert any(n.get("meta", {}).get("sym") for n in symbolic["nodes"] if n["op"] == "placeholder")  # the SymInt input


def test_the_smaller_last_batch_program_verifies_every_graph(parity_bin, last_batch, tmp_path):
    r, records = verify(parity_bin, tmp_path / "out", last_batch, "--backend", "inductor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(records) == 1 and records[0]["verification_code"] == "PASS", records
    names = {o["path"].split("/")[0] for o in records[0]["outputs"]}
    assert names == {"graph_0", "graph_1"}, names  # both graphs compared
    assert records[0]["fp64_reference"] is True
    # A backend that packages a graph at static sizes says so instead of failing on the sizes.
    r, records = verify(parity_bin, tmp_path / "ts", last_batch, "--backend", "torchscript")
    assert records[0]["verification_code"] == "VERIFIER_SKIPPED" and "graph_1 has symbolic" in records[0]["error"], records


def test_dynamic_true_verifies_at_several_shapes(parity_bin, dynamic, tmp_path):
    r, records = verify(parity_bin, tmp_path / "out", dynamic, "--backend", "inductor", "--shapes", "sweep=3")
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = records
    assert rec["verification_code"] == "PASS", rec
    shapes = rec["shapes"]
    assert len(shapes) == 4 and all(s["pass"] for s in shapes), shapes  # the recorded one and 3 more
    sizes = sorted(next(iter(s["symbols"].values())) for s in shapes)
    assert sizes == [3, 6, 9, 12], sizes  # 0.5x, 1x, 1.5x, 2x the recorded batch of 6
    # every shape was compared with its own references
    assert sum(1 for o in rec["outputs"] if o["path"].startswith("[")) == 3 * len(graph_outputs(dynamic))


def graph_outputs(d):
    return manifest(d)["graphs"][0]["expected_outputs"]


def test_a_size_specific_bug_is_found_by_the_sweep_at_its_size(parity_bin, dynamic, tmp_path):
    fault = ["--backend", "fault", "--backend-option", "op=aten::relu", "--backend-option", "only_size=3"]
    r, records = verify(parity_bin, tmp_path / "rec", dynamic, *fault)
    assert r.returncode == 0, r.stdout + r.stderr  # at the recorded batch of 6 the bug does not show
    r, records = verify(parity_bin, tmp_path / "sweep", dynamic, *fault, "--shapes", "sweep")
    assert r.returncode == 1, r.stdout + r.stderr
    (rec,) = records
    assert rec["verification_code"] == "FAIL"
    failing = [s for s in rec["shapes"] if not s["pass"]]
    assert [list(s["symbols"].values()) for s in failing] == [[3]], rec["shapes"]
    sym = next(iter(failing[0]["symbols"]))
    assert f"at {sym}=3" in rec["error"] and f"{sym}=3" in r.stdout, (rec["error"], r.stdout)
    # The failure repro holds the graph at the size it failed at: it fails with no --shapes.
    repro = tmp_path / "sweep" / "repros"
    (d,) = list(repro.iterdir())
    m = manifest(d)
    assert m["failure"]["shape"] == {sym: 3}
    again = run_parity(parity_bin, "repro", "run", str(d), "--backend", "fault")  # the dir's own options
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout + again.stderr
    replay = run_parity(parity_bin, "repro", "run", str(d))  # eager against the outputs it holds at that size
    assert replay.returncode == 0 and "PASS" in replay.stdout, replay.stdout + replay.stderr


def test_a_symbol_outside_its_range_is_bad_input(parity_bin, dynamic, tmp_path):
    m = manifest(dynamic)
    entry = m["graphs"][0]
    g = graph_json(dynamic, entry)
    sym = next(iter(g["symbols"]))
    g["symbols"][sym]["max"] = 4  # the recorded batch of 6 is now out of range
    with open(os.path.join(str(dynamic), entry["file"])) as f:
        original = f.read()
    try:
        with open(os.path.join(str(dynamic), entry["file"]), "w") as f:
            json.dump(g, f)
        # Bad input in every command, named by file and field (never a verdict blaming eager).
        for cmd in (["repro", "run", str(dynamic), "--backend", "eager"],
                    ["verify", str(dynamic), "--backend", "eager", "--output-dir", str(tmp_path / "v")],
                    ["minify", str(dynamic), "--backend", "eager", "--out", str(tmp_path / "m")]):
            r = run_parity(parity_bin, *cmd)
            assert r.returncode == 2, (cmd, r.stdout + r.stderr)
            assert f"{entry['file']}: symbols.{sym}.hint: 6 is outside the symbol's range [2, 4]" in r.stderr, r.stderr
    finally:
        with open(os.path.join(str(dynamic), entry["file"]), "w") as f:
            f.write(original)


def test_a_symbolic_relu_bug_minifies_to_the_relu_with_its_symbol_bound(parity_bin, dynamic, tmp_path):
    knob = ["--backend", "inductor", "--backend-option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy"]
    r = run_parity(parity_bin, "minify", str(dynamic), "--out", str(tmp_path / "m"), *knob, "-j", "2", "--no-stage-bisect",
                   "--no-compiler-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert [c["target"] for c in s["culprit_ops"]] == ["aten::relu"], s["graph_text"]
    d = s["minified_dir"]
    g = graph_json(d, manifest(d)["graphs"][0])
    (sym,) = g["symbols"]
    x = next(n for n in g["nodes"] if n["op"] == "placeholder" and "val" in n.get("meta", {}))
    assert sym in x["meta"]["val"][0]["sym_shape"], x  # the relu's input still binds the symbol
    assert g["symbols"][sym]["min"] <= g["symbols"][sym]["hint"] <= 6
    env = standalone_env(tmp_path)
    p = subprocess.run([sys.executable, os.path.join(d, "repro.py")], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
    again = run_parity(parity_bin, "repro", "run", d, *knob)
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout + again.stderr


def test_a_dir_of_the_previous_format_loads_unchanged(parity_bin, test_data, tmp_path):
    src = os.path.join(test_data, "models", "mlp")
    assert manifest(src)["version"] == 3  # the current format, rewritten below as version 1
    old = tmp_path / "v1"
    subprocess.run(["cp", "-r", src, str(old)], check=True)
    stamp_version(old, 1)
    r = run_parity(parity_bin, "repro", "run", str(old), "--backend", "eager")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_capture_with_dynamic_shapes_records_the_dims_range(parity_bin, tmp_path):
    from torch.export import Dim
    from parity_capture import capture
    torch.manual_seed(0)
    d = capture(Net(), (torch.randn(6, 8),), str(tmp_path / "cap"), dynamic_shapes=({0: Dim("batch", min=2, max=7)},))
    m = manifest(d)
    g = graph_json(d, m["graphs"][0])
    (sym,) = g["symbols"]
    assert g["symbols"][sym] == {"hint": 6, "min": 2, "max": 7}
    r, records = verify(parity_bin, tmp_path / "out", d, "--backend", "eager", "--shapes", "sweep=8")
    assert r.returncode == 0, r.stdout + r.stderr
    sizes = sorted(next(iter(s["symbols"].values())) for s in records[0]["shapes"])
    assert sizes == [2, 3, 4, 5, 6, 7], sizes  # every point the range allows, and no more


def test_a_training_loop_with_a_smaller_last_batch_verifies_its_gradients(parity_bin, tmp_path):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch._dynamo.reset()
    f = torch.compile(model, backend=dump_backend(str(tmp_path / "train")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (8, 8, 5, 3):
            loss = torch.nn.functional.mse_loss(f(torch.randn(n, 8)), torch.randn(n, 4))
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch._dynamo.reset()
    assert not [w for w in caught if issubclass(w.category, ParityCaptureWarning)]
    m = manifest(tmp_path / "train")
    assert [(g["mode"], bool(g.get("tangents"))) for g in m["graphs"]] == [("train", True), ("train", True)]
    assert graph_json(tmp_path / "train", m["graphs"][1]).get("symbols")  # the recompile for batch 5
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "train", "--backend", "inductor", "--shapes", "sweep")
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = records
    assert rec["verification_code"] == "PASS" and rec["experiment"]["test"] == "train"
    grads = [o["path"] for o in rec["outputs"] if "grad/" in o["path"]]
    assert any(p.startswith("graph_1/grad/param/") for p in grads), grads  # the symbolic graph's gradients
    assert "verified at its recorded shape only" in rec["notes"]  # its recorded gradients have the recorded sizes
    # AOTAutograd's stages (what bisection needs) compile the symbolic graph as dynamic too.
    for stage in ("aot_eager", "aot_eager_decomp_partition"):
        r, records = verify(parity_bin, tmp_path / stage, tmp_path / "train", "--backend", stage, "--shapes", "sweep")
        assert records[0]["verification_code"] == "PASS", (stage, records)


def test_a_dynamic_train_step_with_its_loss_inside_sweeps_its_shapes(parity_bin, tmp_path):
    # The loss is computed inside the compiled step: its gradient (1.0) fits every batch size, so
    # the sweep runs the train graph at other sizes, and a bug that shows only at one is found.
    torch.manual_seed(0)
    model = Net()

    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    torch._dynamo.reset()
    f = torch.compile(step, backend=dump_backend(str(tmp_path / "dyn")), dynamic=True)
    f(torch.randn(6, 8), torch.randn(6, 4))
    torch._dynamo.reset()
    (g,) = manifest(tmp_path / "dyn")["graphs"]
    assert g["mode"] == "train" and g.get("tangents") and graph_json(tmp_path / "dyn", g).get("symbols")
    fault = ["--backend", "fault", "--backend-option", "op=aten::relu", "--backend-option", "only_size=3"]
    r, records = verify(parity_bin, tmp_path / "sweep", tmp_path / "dyn", *fault, "--shapes", "sweep")
    assert r.returncode == 1, r.stdout + r.stderr
    (rec,) = records
    assert rec["experiment"]["test"] == "train" and "recorded shape only" not in (rec.get("notes") or "")
    assert [list(s["symbols"].values()) for s in rec["shapes"] if not s["pass"]] == [[3]], rec["shapes"]
    (d,) = list((tmp_path / "sweep" / "repros").iterdir())  # the train graph at the size it failed at
    again = run_parity(parity_bin, "repro", "run", str(d), "--backend", "fault")
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout + again.stderr


class NoGradRegionNet(torch.nn.Module):
    """A train model as HF's decoders write it: a `torch.no_grad()` region inside (the rotary
    embedding's frequencies) and a mask made by vmap (transformers' masking utilities)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("freq", torch.linspace(0.1, 1.0, 8))

    def forward(self, x):
        with torch.no_grad():
            angles = torch.arange(x.shape[0], dtype=torch.float32)[:, None] * self.freq
        keep = torch.vmap(lambda row: row > 0)(x)
        return (self.lin(x) * angles.cos()).masked_fill(keep, 0.0)


def test_a_symbolic_train_graph_with_a_no_grad_region_and_vmap_is_recorded(parity_bin, tmp_path):
    # The graph's ATen form is traced as an inference graph: the region's end turning grad back on
    # (and vmap turning it on for the whole trace) made AOTAutograd trace the joint graph, whose
    # forward returns the saved activations, and the capture was refused (HF Qwen3 under
    # dynamic=True, trained).
    torch.manual_seed(0)
    torch._dynamo.reset()
    b = dump_backend(str(tmp_path / "d"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(NoGradRegionNet(), backend=b, dynamic=True)(torch.randn(6, 8)).sum().backward()
    torch._dynamo.reset()
    assert not [str(w.message) for w in caught if issubclass(w.category, ParityCaptureWarning)]
    (g,) = manifest(tmp_path / "d")["graphs"]
    assert g["mode"] == "train" and graph_json(tmp_path / "d", g).get("symbols")
    r, (rec,) = verify(parity_bin, tmp_path / "v", tmp_path / "d", "--backend", "eager")
    assert r.returncode == 0 and rec["verification_code"] == "PASS", r.stdout + r.stderr


class SizeArith(torch.nn.Module):
    """Sizes in arithmetic as programs write it: rounding, shifts, bitwise ops, math functions
    and floats of sizes, feeding views, factories and tensor math."""

    def forward(self, x):
        n, t = x.shape
        a = round(n / 2) + (n << 1) + (t >> 1) + (n ^ 3) + (n & 6) + (n | 1) + math.ceil(n / 3) + abs(n - t)
        c = math.sqrt(n) + float(t) / n + math.cos(n) + 2.0 ** (n / 4)
        y = (x * a + max(n, t)).view(n * t)[: (n * t) // 2 + 1]
        return y * c, torch.ones(a) * n


def test_size_arithmetic_is_recorded_and_verified_across_shapes(parity_bin, tmp_path):
    d = tmp_path / "arith"
    got, caught = dump(SizeArith(), lambda f: [f(torch.randn(4, 6)), f(torch.randn(5, 7))], d, dynamic=True)
    assert not caught, [str(w.message) for w in caught]  # no graph left out
    targets = {n["target"] for e in manifest(d)["graphs"] for n in graph_json(d, e)["nodes"] if n["op"] == "call_function"}
    assert {"sym::round", "sym::lshift", "sym::xor", "sym::sqrt", "sym::cos"} <= targets, sorted(targets)
    r, records = verify(parity_bin, tmp_path / "out", d, "--backend", "inductor", "--shapes", "sweep=2")
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = records
    assert rec["verification_code"] == "PASS", rec
    assert len(rec["shapes"]) >= 2 and all(s["pass"] for s in rec["shapes"]), rec["shapes"]


def test_a_symbolic_graph_compiles_at_a_call_that_runs_nothing_and_its_next_call_runs_it():
    """python_backends.compiled_by_a_call_that_runs_nothing, the first step of a try of the compiler
    bisection in step across ranks (rank_replay.try_in_step): the backend compiles the symbolic
    graph, nothing of it runs (a rank's graph would enter its collectives), the next calls run what
    it compiled without compiling again, at other sizes too; a compile that raises raises there."""
    from parity_capture.backends.python_backends import compiled_by_a_call_that_runs_nothing
    counts = {"compiled": 0, "ran": 0}

    @torch._dynamo.register_backend(name="parity_test_counting")
    def counting(gm, example_inputs, options=None):  # torch.compile's options reach a backend as this kwarg
        if (options or {}).get("fail"):
            raise RuntimeError("this stage refuses the graph")
        counts["compiled"] += 1

        def call(*args):
            counts["ran"] += 1
            return gm(*args)
        return call

    def f(x):
        return (torch.relu(x) * x.shape[0],)
    gm = torch.fx.symbolic_trace(f)
    fn = compiled_by_a_call_that_runs_nothing(gm, "parity_test_counting", {}, [torch.randn(4, 3)])
    assert counts == {"compiled": 1, "ran": 0}
    for n in (4, 7):
        x = torch.randn(n, 3)
        torch.testing.assert_close(fn(x)[0], torch.relu(x) * n)
    assert counts == {"compiled": 1, "ran": 2}
    torch._dynamo.reset()
    with pytest.raises(Exception, match="this stage refuses the graph"):
        compiled_by_a_call_that_runs_nothing(gm, "parity_test_counting", {"fail": True}, [torch.randn(4, 3)])


def test_a_tensor_subclass_of_a_dynamic_shape_is_recorded_desugared_with_its_sizes(parity_bin, tmp_path):
    """A traceable tensor subclass (TwoTensor here; DTensor in test_distributed.py's tp_sp_breaks)
    in a symbolic graph: AOTAutograd takes and returns its inner tensors and then its symbolic
    outer sizes and strides, and the call is recorded desugared the same way (lowering.desugared_symbolic).
    Before, the graph was skipped ("the symbolic graph takes 7 inputs, the call gave 2")."""
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return torch.sin(x) * x.shape[0] + 1

    def calls(compiled):
        return [compiled(TwoTensor(torch.randn(n, 3), torch.randn(n, 3))) for n in (4, 6)]

    results, caught = dump(f, calls, tmp_path / "two", dynamic=True)
    assert not caught, [str(w.message) for w in caught]
    (entry,) = manifest(tmp_path / "two")["graphs"]
    assert len(entry["inputs"]) == 2 and len(entry["output_names"]) > 2, entry  # a and b in; a, b and sizes out
    assert "symbols" in graph_json(tmp_path / "two", entry)
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "two"))
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_a_graph_that_writes_an_input_records_the_write_or_is_refused():
    """AOTAutograd keeps an inference graph's input writes as copies into the inputs (a running
    statistic): with the inputs' values after the call each becomes an output mutated/<key> holding
    the program's new value; without them the graph is refused, its write never left unjudged."""
    import torch.fx
    from parity_capture.errors import CaptureError
    from parity_capture.lowering import aot_inference_graph
    from parity_capture.symbolic_lowering import capture_symbolic_graph

    def step(x, stat):
        stat.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return (x * 2,)

    gm = torch.fx.symbolic_trace(step)
    x, stat = torch.randn(4, 3), torch.zeros(3)
    aten = aot_inference_graph(gm, [x, stat.clone()])
    with pytest.raises(CaptureError, match="writes its input"):
        capture_symbolic_graph(aten, None, "g", [x, stat], [x * 2])
    after = stat.clone().mul_(0.9).add_(x.mean(0), alpha=0.1)
    aten = aot_inference_graph(gm, [x, stat.clone()])
    _, entry, tensors = capture_symbolic_graph(aten, None, "g", [x, stat], [x * 2], {1: "buffer/stat"}, inputs_after=[x, after])
    assert entry["output_names"][-1] == "mutated/buffer/stat", entry["output_names"]
    torch.testing.assert_close(tensors[entry["expected_outputs"][-1]], after)
