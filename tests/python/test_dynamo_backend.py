"""The dynamo dump backend on programs as they run (tools/parity_capture/dynamo_backend.py), and
what every consumer makes of its dirs: truthful dtype/device/mode per graph, training steps
with the gradients the program fed to backward, a capture that never breaks the program, an fp64
reference that follows captured layouts and is never silently missing. A recorded train graph is
verified with aot_eager where what is checked is the recording (AOTAutograd's forward and backward
of it, which Inductor runs too, without generating and building kernels), with Inductor where
Inductor's own lowering is what once failed (a reshape it lays out otherwise, BatchNorm's writes)."""
import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest
import torch

from conftest import manifest, run_parity, verify
from parity_capture import dump_backend
from parity_capture.dynamo_backend import ParityCaptureWarning
from parity_capture.errors import CaptureError
from parity_capture.serialize import graph_to_json, write_repro_dir


class Net(torch.nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.drop = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.drop(torch.relu(self.norm(self.fc(x)))))


def dump(model, calls, out, **compile_kwargs):
    """Runs `calls(compiled)` with the dump backend; returns its results and the warnings."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=dump_backend(str(out)), **compile_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = calls(compiled)
    torch._dynamo.reset()
    return results, [w for w in caught if issubclass(w.category, ParityCaptureWarning)]


def test_a_bfloat16_program_is_recorded_and_checked_as_bfloat16(parity_bin, tmp_path):
    torch.manual_seed(0)
    model = Net().to(torch.bfloat16).eval()
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        dump(model, lambda f: f(x), tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert (m["dtype"], m["device"], m["mode"]) == ("bfloat16", "cpu", "eval")
    assert m["graphs"][0].get("dtype", m["dtype"]) == "bfloat16"
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["experiment"]["dtype"] == "bfloat16" and records[0]["tolerance"] == 1e-3  # not float32's 1e-4
    assert "bfloat16" in r.stdout


def test_an_autocast_program_is_recorded_with_its_amp_dtype(parity_bin, tmp_path):
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        dump(model, lambda f: f(torch.randn(4, 8)), tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert m["amp"] == "bfloat16" and m["dtype"] == "float32"
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["experiment"]["dtype"] == "amp" and records[0]["tolerance"] == 1e-3


class Rotary(torch.nn.Module):
    """A rotary embedding as HF's Llama computes it under amp: the frequencies in float32 inside
    `autocast(enabled=False)` (a bmm of inv_freq by the positions), then cos and sin applied."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16)))
        self.k = torch.nn.Linear(16, 16, bias=False)

    def forward(self, x, pos):
        with torch.autocast("cpu", enabled=False):
            inv = self.inv_freq[None, :, None].expand(pos.shape[0], -1, 1)
            freqs = (inv @ pos[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), -1)
        k = self.k(x)
        return k * emb.cos() + torch.cat((-k[..., 8:], k[..., :8]), -1) * emb.sin()


def test_an_autocast_program_s_float32_region_is_replayed_in_float32(tmp_path):
    # The dump's replay check runs the recorded graph as parity does, without the program's
    # ambient autocast: left on, it cast the region's float32 bmm to bf16 again, and the
    # frequencies at 1024 positions came out 32% off, so the graph was refused (Llama, Mistral
    # and Qwen2 under amp bf16 on CUDA were).
    torch.manual_seed(0)
    pos = torch.arange(1024)[None]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        _, caught = dump(Rotary(), lambda f: f(torch.randn(1, 1024, 16), pos), tmp_path / "prog")
    assert not caught, [str(w.message) for w in caught]
    (g,) = manifest(tmp_path / "prog")["graphs"]
    gjson = json.loads((tmp_path / "prog" / g["file"]).read_text())
    (bmm,) = [n for n in gjson["nodes"] if n.get("target") == "aten::bmm"]
    assert bmm["meta"]["val"][0]["dtype"] == "float32"


def test_a_dir_runs_on_its_own_device_unless_asked(parity_bin, tmp_path):
    torch.manual_seed(0)
    with torch.no_grad():
        dump(Net().eval(), lambda f: f(torch.randn(4, 8)), tmp_path / "cpu")
    assert manifest(tmp_path / "cpu")["device"] == "cpu"
    r, records = verify(parity_bin, tmp_path / "a", tmp_path / "cpu", "--backend", "eager")
    assert records[0]["experiment"]["accelerator"] == "cpu" and records[0]["verification_code"] == "PASS"
    r, records = verify(parity_bin, tmp_path / "b", tmp_path / "cpu", "--backend", "eager", "--device", "cuda")
    if torch.cuda.is_available():  # asked: CUDA; a build or machine without it is bad input (--device)
        assert records[0]["experiment"]["accelerator"] == "cuda"
    else:
        assert r.returncode == 2 and "--device cuda" in r.stderr and not records, r.stderr
    # A dir captured on CUDA runs there without a flag, and on the CPU when asked.
    shutil.copytree(tmp_path / "cpu", tmp_path / "cuda")
    m = manifest(tmp_path / "cuda")
    m["device"] = "cuda"
    json.dump(m, open(tmp_path / "cuda" / "manifest.json", "w"))
    r, records = verify(parity_bin, tmp_path / "c", tmp_path / "cuda", "--backend", "eager")
    assert records[0]["experiment"]["accelerator"] == "cuda"
    if not torch.cuda.is_available():
        assert records[0]["verification_code"] == "VERIFIER_SKIPPED" and "device cuda" in records[0]["error"]
    r, records = verify(parity_bin, tmp_path / "d", tmp_path / "cuda", "--backend", "eager", "--device", "cpu")
    assert records[0]["experiment"]["accelerator"] == "cpu" and records[0]["verification_code"] == "PASS"


def test_a_failure_minifies_on_the_device_it_was_recorded_on(parity_bin, tmp_path):
    """The fault backend's only_on= stands in for a device-specific bug (a Triton kernel on
    CUDA): `cpu:0` is a device string the CPU runs, unlike the capture's `cpu`."""
    torch.manual_seed(0)
    with torch.no_grad():
        dump(Net().eval(), lambda f: f(torch.randn(4, 8)), tmp_path / "prog")
    bug = ["--backend", "fault", "--backend-option", "op=aten::relu", "--backend-option", "only_on=cpu:0"]
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "prog", *bug)
    assert records[0]["verification_code"] == "PASS"  # on the capture's device the bug is absent
    r, records = verify(parity_bin, tmp_path / "out2", tmp_path / "prog", *bug, "--device", "cpu:0")
    assert records[0]["verification_code"] == "FAIL", r.stdout
    repro = records[0]["repro_dir"]
    assert manifest(repro)["device"] == "cpu:0"
    r = run_parity(parity_bin, "minify", repro)  # no flags: it must run where it failed
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.load(open(repro + "-minify/summary.json"))
    assert summary["culprit"]["target"].startswith("aten::relu"), summary["culprit"]


def train(model, x_batches, compiled_fn, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for x in x_batches:
        out = compiled_fn(x)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses


def test_a_training_loop_is_captured_with_the_gradients_its_backward_used(parity_bin, tmp_path):
    torch.manual_seed(0)
    model = Net(dropout=0.25)
    model.norm.weight.requires_grad_(False)  # a frozen parameter is not differentiated
    xs = [torch.randn(6, 8) for _ in range(2)]

    def program(f):
        losses = train(model, xs, f)
        with torch.no_grad():  # validation in the same program: an eval graph
            f(xs[0])
        return losses

    dump(model, program, tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert m["mode"] == "train"
    g0, g1 = m["graphs"]
    assert g0.get("mode", m["mode"]) == "train" and g1.get("mode", m["mode"]) == "eval"
    assert g0["tangents"] == ["graph_0/tangent/0"]
    assert "param/fc.weight" in g0["requires_grad"] and "param/norm.weight" not in g0["requires_grad"]
    assert not any(name.startswith("l_x") for name in g0["requires_grad"])  # the data did not require grad

    for backend in ("eager", "aot_eager"):
        r, records = verify(parity_bin, tmp_path / backend, tmp_path / "prog", "--backend", backend)
        assert r.returncode == 0, r.stdout + r.stderr
        paths = [o["path"] for o in records[0]["outputs"]]
        assert records[0]["experiment"]["test"] == "train"
        assert "graph_0/grad/param/fc.weight" in paths and "graph_0/grad/param/head.bias" in paths, paths
        assert "graph_0/grad/param/norm.weight" not in paths
        assert not any(p.startswith("graph_0/grad/input") for p in paths)
        assert "graph_1/0" in paths and not any(p.startswith("graph_1/grad") for p in paths)

    # A wrong backward kernel: forward values right, parameter gradients wrong.
    r, records = verify(parity_bin, tmp_path / "bwd", tmp_path / "prog", "--backend", "fault",
                        "--backend-option", "op=aten::relu", "--backend-option", "phase=backward")
    assert r.returncode == 1 and records[0]["verification_code"] == "FAIL", r.stdout
    verdicts = {o["path"]: o["pass"] for o in records[0]["outputs"]}
    assert verdicts["graph_0/0"] and verdicts["graph_1/0"]
    assert not verdicts["graph_0/grad/param/fc.weight"]


def test_a_backward_called_from_compiled_code_records_only_the_programs_graphs(parity_bin, tmp_path):
    # backward() inside the compiled function, after a graph break: the engine calls the
    # backend's gradient watch from the compiled frame's code, where dynamo traced it and the
    # backend recorded parity's own code as 12 more graphs (one of them not loadable).
    torch.manual_seed(0)
    fc = torch.nn.Linear(8, 8)

    def step(x):
        h = torch.relu(fc(x))
        torch._dynamo.graph_break()
        loss = (h.sigmoid() * 3).sum()
        loss.backward()
        return loss

    dump(step, lambda f: f(torch.randn(4, 8)), tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert [g["name"] for g in m["graphs"]] == ["graph_0", "graph_1"], [g["name"] for g in m["graphs"]]
    assert all(g.get("mode", m["mode"]) == "train" and g.get("tangents") for g in m["graphs"]), m["graphs"]
    r, records = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


class EmptyCache(torch.nn.Module):
    """A key cache that starts empty, as transformers' DynamicCache does (Bloom): torch.cat of an
    empty tensor and the transposed keys, then a reshape of the result."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, _ = self.qkv(x).view(b, s, 4, 3, 8).unbind(3)
        keys = torch.cat([torch.tensor([]), k.transpose(1, 2)], dim=-2)
        return (q.transpose(1, 2).reshape(b * 4, s, 8) @ keys.reshape(b * 4, -1, 8).transpose(-1, -2)).softmax(-1)


def test_a_reshape_stays_legal_where_the_backend_lays_a_value_out_otherwise(parity_bin, tmp_path):
    # torch.export wrote the reshape as a view (the traced cat was contiguous); Inductor folds the
    # cat into the transposed keys and refused the view: EXCEPTION_RAISED where the program ran.
    torch.manual_seed(0)
    with torch.no_grad():
        dump(EmptyCache().eval(), lambda f: f(torch.randn(2, 9, 32)), tmp_path / "prog")
    r, records = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "inductor")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


def test_a_recorded_graph_that_computes_other_values_than_the_program_is_refused(tmp_path):
    # The replay check each recorded graph passes (lowering.replay_mismatch): the graph read back
    # and run on its recorded inputs gives the program's outputs; a tensor under the wrong key
    # (a parameter of the same shape: no load error, silently other values) or a lowering that
    # traced a value as zeros does not, and the dump leaves such a graph out, saying why.
    from parity_capture.replay_check import replay_mismatch
    from parity_capture.reader import load_repro
    torch.manual_seed(0)
    a, b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    with torch.no_grad():
        dump(lambda x: b(torch.tanh(a(x))), lambda f: f(torch.randn(4, 8)), tmp_path / "prog")
    (g,) = load_repro(str(tmp_path / "prog")).graphs
    assert replay_mismatch(g.gjson, g.entry, g.tensors) is None
    swapped = dict(g.tensors, **{"param/a.weight": g.tensors["param/b.weight"]})  # same shape, other values
    assert "relative RMS difference" in replay_mismatch(g.gjson, g.entry, swapped)
    zeros = dict(g.tensors, **{k: torch.zeros_like(g.tensors[k]) for k in g.entry["expected_outputs"]})
    assert "output 0" in replay_mismatch(g.gjson, g.entry, zeros)


def test_the_replay_check_allows_16_bit_rounding_in_float32_outputs_of_a_16_bit_computation(tmp_path):
    # Under amp bf16 the logits are float32 but computed in bfloat16: the replay check allows them
    # the rounding of 16-bit compute (5e-2 relative RMS), as it does 16-bit outputs; a float32
    # computation keeps 1e-2. (On CUDA another attention kernel at the replay moved a RoPE model's
    # logits by 1.1%, and the dump refused it.) Off by 2%, the first passes and the second not.
    from parity_capture.replay_check import replay_mismatch
    from parity_capture.reader import load_repro
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    with torch.no_grad():
        dump(lambda x: lin(x).to(torch.bfloat16).tanh().float(), lambda f: f(torch.randn(4, 8)), tmp_path / "half")
        dump(lambda x: lin(x).tanh(), lambda f: f(torch.randn(4, 8)), tmp_path / "full")
    for name, allowed in (("half", True), ("full", False)):
        (g,) = load_repro(str(tmp_path / name)).graphs
        assert replay_mismatch(g.gjson, g.entry, g.tensors) is None
        off = dict(g.tensors, **{k: g.tensors[k] * 1.02 for k in g.entry["expected_outputs"]})
        assert (replay_mismatch(g.gjson, g.entry, off) is None) == allowed, name
        far = dict(g.tensors, **{k: g.tensors[k] * 1.2 for k in g.entry["expected_outputs"]})
        assert "relative RMS difference" in replay_mismatch(g.gjson, g.entry, far), name


def test_attention_with_dropout_is_recorded_and_without_it_is_checked(parity_bin, tmp_path):
    # Attention draws random numbers only with dropout: a train step with dropout_p > 0 replays
    # other numbers than the program drew and is recorded unchecked (it was refused as a wrong
    # graph); without dropout the replay is compared like any graph's (`repro run`'s side of the
    # rule: test_interpreter_program.cpp, AttentionIsRandomOnlyWithDropout).
    from parity_capture.replay_check import replay_mismatch
    from parity_capture.reader import load_repro
    torch.manual_seed(0)
    proj = torch.nn.Linear(8, 24)

    def attend(p):
        def step(x):
            q, k, v = proj(x).view(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
            loss = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=p).pow(2).sum()
            loss.backward()
            return loss
        return step

    for p, name in ((0.3, "dropout"), (0.0, "plain")):
        _, caught = dump(attend(p), lambda f: f(torch.randn(2, 5, 8)), tmp_path / name)
        assert not caught, [str(w.message) for w in caught]
        (g,) = load_repro(str(tmp_path / name)).graphs
        r = run_parity(parity_bin, "repro", "run", str(tmp_path / name), "--backend", "eager")
        assert r.returncode == 0, r.stdout + r.stderr
        assert ("random" in r.stdout) == (p > 0), r.stdout
    zeros = dict(g.tensors, **{k: torch.zeros_like(g.tensors[k]) for k in g.entry["expected_outputs"]})
    assert "output 0" in replay_mismatch(g.gjson, g.entry, zeros)  # the plain graph is compared


def test_two_modules_parameters_of_one_name_keep_apart_keys(parity_bin, tmp_path):
    # A step function over two modules: both weights are `_parameters['weight']` of a module the
    # function reads (not of self), and both were recorded as param/weight: the dir loaded one
    # in the other's place (exit 2, "tensor is float32[1, 8] but node expects float32[8, 8]").
    torch.manual_seed(0)
    enc, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)

    def step(x):
        loss = head(torch.tanh(enc(x))).pow(2).mean()
        loss.backward()
        return loss

    dump(step, lambda f: f(torch.randn(4, 8)), tmp_path / "prog")
    keys = {k for e in manifest(tmp_path / "prog")["graphs"] for k in e.get("requires_grad", []) if k.startswith("param/")}
    assert keys == {"param/enc.weight", "param/enc.bias", "param/head.weight", "param/head.bias"}, keys
    r, records = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


def test_gradients_and_parameters_a_step_reads_keep_apart_and_a_graph_of_parameters_only_runs(parity_bin, tmp_path):
    # A compiled gradient clip reads every parameter's .grad: each was recorded under its
    # parameter's key (param/fc.bias, the source `..._parameters['bias'].grad`), so a graph that
    # read the parameter too held two values under one name. An EMA update reads parameters
    # only: a graph without placeholders, whose aot_eager run lost its lifted attributes
    # ("referenced nonexistent value").
    torch.manual_seed(0)
    model, ema = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    model(torch.randn(3, 4)).square().sum().backward()

    def clip():
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1, foreach=False)
        return norm + model.weight.sum()

    def ema_update():
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.1)

    dump(clip, lambda f: f(), tmp_path / "clip")
    dump(ema_update, lambda f: f(), tmp_path / "ema")
    assert manifest(tmp_path / "clip")["model"] == "clip"  # named after its dir: a baseline row of its own
    (entry,) = manifest(tmp_path / "clip")["graphs"]
    graph = json.load(open(tmp_path / "clip" / entry["file"]))
    attrs = sorted(n["target"] for n in graph["nodes"] if n["op"] == "get_attr")
    assert attrs == ["param/weight"], attrs  # the parameter; its gradients are inputs
    assert len([n for n in graph["nodes"] if n["op"] == "placeholder"]) == 2
    graph = json.load(open(tmp_path / "ema" / manifest(tmp_path / "ema")["graphs"][0]["file"]))
    assert not [n for n in graph["nodes"] if n["op"] == "placeholder"]
    for name, backend in (("clip", "eager"), ("ema", "aot_eager")):
        r, records = verify(parity_bin, tmp_path / f"v-{name}", tmp_path / name, "--backend", backend)
        assert r.returncode == 0 and [x["verification_code"] for x in records] == ["PASS"], r.stdout + r.stderr


def test_torch_func_transforms_inside_compiled_code_are_recorded(parity_bin, tmp_path):
    # vmap(grad(...)) traced by dynamo: its graph runs the transforms' level bookkeeping itself.
    # torch.export fails on it part-way, which left a vmap level pushed: the dump then wrote
    # nothing ("Cannot access data pointer of Tensor that doesn't have storage") and the
    # program's own ops ran inside the leaked level.
    from torch.func import grad, vmap
    torch.manual_seed(0)
    w, xs = torch.randn(5, 3), torch.randn(4, 2, 5)

    def loss(w, x):
        return ((x @ w).tanh() ** 2).sum()

    def per_sample_grads(w, xs):
        return vmap(grad(loss), in_dims=(None, 0))(w, xs).mean(0)

    got, caught = dump(per_sample_grads, lambda f: f(w, xs), tmp_path / "prog")
    assert not caught, [str(c.message) for c in caught]
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0  # no level left behind
    assert torch.allclose(got, per_sample_grads(w, xs))
    assert [g["name"] for g in manifest(tmp_path / "prog")["graphs"]] == ["graph_0"]
    r, records = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "aot_eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr
    # and the graph computes what the program did: torch.export, run when the program ran, traced
    # grad's result as zeros (a graph both sides agreed on, and wrong)
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "prog"), "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr

    # hessian (forward-mode AD over reverse) and jacrev: traced with grad on, and a failed
    # trace's forward-mode AD level is exited too.
    from torch.func import hessian, jacrev

    def curvature(x):
        return hessian(lambda v: (v.sin() * v.cos().sum()).sum())(x), jacrev(torch.sin)(x)

    x = torch.randn(4)
    got, caught = dump(curvature, lambda f: f(x), tmp_path / "hess")
    assert not caught, [str(c.message) for c in caught]
    assert all(torch.allclose(a, b) for a, b in zip(got, curvature(x)))
    r, records = verify(parity_bin, tmp_path / "vh", tmp_path / "hess", "--backend", "aot_eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


def test_the_capture_never_breaks_the_program(parity_bin, tmp_path, capfd):
    torch.manual_seed(0)
    model = Net().eval()
    batches = [torch.randn(n, 8) for n in (8, 8, 5, 3)]

    def run_all(f):
        with torch.no_grad():
            return [f(x) for x in batches]

    want = run_all(model)
    got, caught = dump(model, run_all, tmp_path / "dyn", dynamic=True)
    assert all(torch.equal(a, b) for a, b in zip(want, got))  # bit-identical
    assert not caught and not manifest(tmp_path / "dyn").get("skipped_graphs")  # symbolic graphs are recorded (test_symbolic.py)
    printed = capfd.readouterr()
    assert "def forward" not in printed.out + printed.err  # torch's trace dumps stay out of the program's output
    r, records = verify(parity_bin, tmp_path / "dynout", tmp_path / "dyn", "--backend", "eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr

    class TwoGraphs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = torch.relu(self.fc(x))
            torch._dynamo.graph_break()
            return torch.cond(y.sum() > 0, lambda t: t * 2, lambda t: t - 1, (y,))

    # The second graph's lowering fails (as one holding what the format cannot express would):
    # it is skipped with one warning, the program runs on, the first graph is recorded.
    import parity_capture.recording as db  # what the dump backend records with
    real = db.capture_graph_module

    def failing(gm, inputs, name, **kw):
        if name == "graph_1":
            raise CaptureError("an op the format cannot hold")
        return real(gm, inputs, name, **kw)

    cond_model = TwoGraphs().eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        want = cond_model(x)
    db.capture_graph_module = failing
    try:
        got, caught = dump(cond_model, lambda f: f(x), tmp_path / "cond")
    finally:
        db.capture_graph_module = real
    assert torch.equal(want, got)
    m = manifest(tmp_path / "cond")
    assert [g["name"] for g in m["graphs"]] == ["graph_0"]
    assert [s["graph"] for s in m["skipped_graphs"]] == ["graph_1"] and len(caught) == 1
    assert "graph_1" in str(caught[0].message)
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "cond", "--backend", "eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


def test_random_ops_leave_the_programs_random_numbers_alone(tmp_path):
    model = Net(dropout=0.5)
    x = torch.randn(4, 8)
    torch.manual_seed(1)
    want = [model(x) for _ in range(2)]
    torch.manual_seed(1)
    got, _ = dump(model, lambda f: [f(x) for _ in range(2)], tmp_path / "p")
    assert all(torch.equal(a, b) for a, b in zip(want, got))


def write_dir(path, fn, inputs, params, name="graph_0"):
    """A one-graph repro dir of `fn` traced by make_fx on real tensors (the layouts they have)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(fn, tracing_mode="real")(*inputs, *params.values())
    phs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    attr_keys = {ph: f"param/{k}" for ph, k in zip(phs[len(inputs):], params)}
    g = graph_to_json(gm, name, attr_keys)
    outs = fn(*inputs, *params.values())
    entry = {"name": name, "file": f"graphs/{name}.json", "inputs": {ph: f"{name}/input/{ph}" for ph in phs[:len(inputs)]},
             "expected_outputs": [f"{name}/output/{k}" for k in range(len(outs))]}
    tensors = {f"{name}/input/{ph}": t for ph, t in zip(phs, inputs)}
    tensors.update({f"param/{k}": v for k, v in params.items()})
    tensors.update({f"{name}/output/{k}": o for k, o in enumerate(outs)})
    write_repro_dir(str(path), {"model": os.path.basename(str(path)), "mode": "eval", "dtype": "float32", "device": "cpu"},
                    [(g, entry)], tensors)


def test_the_fp64_reference_follows_captured_layouts(parity_bin, tmp_path, monkeypatch):
    """conv3d on channels_last_3d data keeps that layout in float32 (mkldnn) but not in float64;
    a view legal only on the captured layout failed the fp64 run (as SDPA's on CUDA did for beit).
    With one thread (the suite's OMP/MKL_NUM_THREADS=1) aten takes another conv3d kernel, which
    keeps no layout: this test runs with two, here and in parity's processes."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        layout_kept_in_float32(parity_bin, tmp_path)
    finally:
        torch.set_num_threads(threads)


def layout_kept_in_float32(parity_bin, tmp_path):
    def fn(x, w):
        y = torch.ops.aten.convolution(x, w, None, [1, 1, 1], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1)
        y = y.permute(0, 2, 3, 4, 1)
        return (y.view(y.shape[0], -1),)

    torch.manual_seed(0)
    x = torch.randn(2, 3, 2, 3, 3).to(memory_format=torch.channels_last_3d)
    w = torch.randn(4, 3, 1, 1, 1).to(memory_format=torch.channels_last_3d)
    write_dir(tmp_path / "video", fn, [x], {"w": w})
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "video", "--backend", "eager")
    assert records[0]["verification_code"] == "PASS", r.stdout
    assert records[0]["fp64_reference"] is True and "reference_error" not in records[0], records[0]
    assert "no fp64 reference" not in r.stdout
    r = run_parity(parity_bin, "repro", "run", str(tmp_path / "video"))  # the stored contiguous input gets its layout back
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_missing_fp64_reference_is_never_silent(parity_bin, tmp_path):
    """int8 weight-only linear (torchao/gpt-fast style): its kernel rejects float64 activations."""
    def fn(x, w, scales):
        return (torch.ops.aten._weight_int8pack_mm(x, w, scales),)

    torch.manual_seed(0)
    write_dir(tmp_path / "int8", fn, [torch.randn(2, 8)],
              {"w": torch.randint(-8, 8, (4, 8), dtype=torch.int8), "scales": torch.rand(4)})
    out = tmp_path / "out"
    r, records = verify(parity_bin, out, tmp_path / "int8", "--backend", "eager")
    rec = records[0]
    assert rec["verification_code"] == "PASS" and rec["fp64_reference"] is False and rec["cosine"] is True
    assert "_weight_int8pack_mm" in rec["reference_error"]
    assert "no fp64 reference: decided by cosine similarity" in r.stdout
    assert "no fp64 reference, decided by cosine similarity" in (out / "junit.xml").read_text()
    assert "no fp64 reference" in (out / "summary.md").read_text()
    r = run_parity(parity_bin, "report", str(out / "results.jsonl"), "-o", str(tmp_path / "report.html"))
    assert r.returncode == 0, r.stderr
    assert "no fp64 reference, decided by cosine similarity" in (tmp_path / "report.html").read_text()
    # The gate: NO_FP64 passes, and fails under --strict.
    exp = tmp_path / "expected"
    r = run_parity(parity_bin, "ci", "--expected", str(exp), "--results", str(out / "results.jsonl"), "--output-dir",
                   str(tmp_path / "g0"), "--update-expected")
    assert r.returncode == 0, r.stdout + r.stderr
    for strict, code in ((False, 0), (True, 1)):
        gate_out = tmp_path / f"gate{int(strict)}"
        r = run_parity(parity_bin, "ci", "--expected", str(exp), "--results", str(out / "results.jsonl"), "--output-dir",
                       str(gate_out), *(["--strict"] if strict else []))
        assert r.returncode == code, r.stdout + r.stderr
        rows = json.load(open(gate_out / "gate.json"))["rows"]
        assert rows[0]["verdict"] == "NO_FP64"
    assert "without an fp64 reference" in r.stdout


def test_a_program_whose_graphs_never_reach_the_backend_is_told_why_there_is_no_dir(tmp_path):
    # dynamo hands the backend no graph (nothing to compile here; in programs, a graph break it
    # cannot handle: a fused optimizer's step, an RNN module): no dir, and one line at exit says why
    program = ("import torch\nfrom parity_capture import dump_backend\n"
               "f = torch.compile(lambda x: x, backend=dump_backend(%r))\nprint(f(torch.ones(2)).sum().item())\n"
               % str(tmp_path / "none"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.join(os.path.dirname(__file__), "..", "..", "tools"),
                                                                   os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "2.0", r.stderr
    assert "no graph reached this backend" in r.stderr and str(tmp_path / "none") in r.stderr
    assert not (tmp_path / "none").exists()


def test_attention_is_recorded_as_the_call_the_program_made(parity_bin, tmp_path):
    # A lowering traced without grad records the attention kernel dispatch chose for inference
    # (on CUDA, cudnn's without its logsumexp: a train run of the graph then failed in its
    # backward). Recorded as scaled_dot_product_attention, each run and backend chooses its own;
    # grouped-query attention keeps enable_gqa.
    from parity_capture.reader import load_repro
    torch.manual_seed(0)
    q_p, kv_p = torch.nn.Linear(16, 16), torch.nn.Linear(16, 8)

    def step(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            q = q_p(x).view(2, 5, 4, 4).transpose(1, 2)
            kv = kv_p(x).view(2, 5, 2, 4).transpose(1, 2)
            loss = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True).float().pow(2).mean()
        loss.backward()
        return loss

    _, caught = dump(step, lambda f: f(torch.randn(2, 5, 16)), tmp_path / "gqa")
    assert not caught, [str(w.message) for w in caught]
    (g,) = load_repro(str(tmp_path / "gqa")).graphs
    calls = [n for n in g.gjson["nodes"] if "attention" in str(n.get("target"))]
    assert [n["target"] for n in calls] == ["aten::scaled_dot_product_attention"], calls
    assert calls[0]["kwargs"].get("enable_gqa") is True and calls[0]["kwargs"].get("is_causal") is True
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "gqa", "--backend", "aot_eager")
    assert r.returncode == 0 and records[0]["verification_code"] == "PASS", r.stdout + r.stderr


class ConvBN(torch.nn.Module):
    """A block that writes state in train mode: BatchNorm's running statistics."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3))).float()


def test_batchnorm_trained_under_autocast_records_its_running_statistics(parity_bin, tmp_path):
    """Under autocast the graph is lowered through AOTAutograd, which keeps the buffers' writes as
    copies into the inputs: each becomes an output mutated/<buffer> holding the program's new
    value (the graph was skipped until then: "returns 7 values but the call returned 1"), and
    Inductor's train step of it passes with them compared."""
    torch.manual_seed(0)
    model = ConvBN().train()
    x = torch.randn(4, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, caught = dump(model, lambda f: f(x).sum().backward(), tmp_path / "bn")
    m = manifest(tmp_path / "bn")
    assert not m.get("skipped_graphs") and not caught, (m.get("skipped_graphs"), [str(w.message) for w in caught])
    g = m["graphs"][0]
    mutated = [n for n in g["output_names"] if n.startswith("mutated/")]
    assert sorted(mutated) == ["mutated/buffer/bn.num_batches_tracked", "mutated/buffer/bn.running_mean",
                               "mutated/buffer/bn.running_var"], g["output_names"]
    # The recorded new statistics are the program's.
    from safetensors.torch import load_file
    tensors = load_file(os.path.join(tmp_path / "bn", m["tensors"]))
    k = g["expected_outputs"][g["output_names"].index("mutated/buffer/bn.running_mean")]
    torch.testing.assert_close(tensors[k], model.bn.running_mean)
    # Inductor compiles the train step, writes included (the suite's conv net with BatchNorm
    # trained through Inductor: the smallest one, its compile a few seconds).
    r, (rec,) = verify(parity_bin, tmp_path / "v", tmp_path / "bn", "--backend", "inductor")
    assert r.returncode == 0 and rec["verification_code"] == "PASS", r.stdout + r.stderr
    assert any(o["path"].startswith("mutated/buffer/bn.") for o in rec["outputs"]), rec["outputs"]


class TaggedLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.rnn = torch.nn.LSTM(8, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 20)

    def forward(self, tok):
        h, _ = self.rnn(self.emb(tok))
        return torch.nn.functional.cross_entropy(self.head(h).flatten(0, 1).float(), tok.flatten())


def test_an_lstm_trained_under_autocast_is_recorded_as_training_decomposes_it(parity_bin, tmp_path):
    """The trace behind the recorded forward runs without grad, where ATen's CPU LSTM picks
    oneDNN's RNN layer with train=False (an inference-only call: its backward needs a workspace
    only a training call makes); every backend then failed the train step
    (aot_eager: "expected all tensors_saved_with_vc_check to be Tensors"). A graph the program
    differentiates is traced as training decomposes it: the unrolled cell, and the step passes."""
    torch.manual_seed(0)
    model = TaggedLSTM()
    tok = torch.randint(0, 20, (2, 3))
    # (allow_rnn: dynamo runs an LSTM eagerly without it)
    with torch._dynamo.config.patch(allow_rnn=True), torch.autocast("cpu", dtype=torch.bfloat16):
        _, caught = dump(model, lambda f: f(tok).backward(), tmp_path / "lstm")
    m = manifest(tmp_path / "lstm")
    assert not m.get("skipped_graphs") and not caught, (m.get("skipped_graphs"), [str(w.message) for w in caught])
    g = json.load(open(os.path.join(tmp_path / "lstm", m["graphs"][0]["file"])))
    targets = {n["target"] for n in g["nodes"] if n["op"] == "call_function"}
    assert "aten::mkldnn_rnn_layer" not in targets and "aten::sigmoid" in targets, sorted(targets)
    r, (rec,) = verify(parity_bin, tmp_path / "v", tmp_path / "lstm", "--backend", "aot_eager")
    assert r.returncode == 0 and rec["verification_code"] == "PASS", r.stdout + r.stderr
    assert any(o["path"].startswith("grad/") for o in rec["outputs"]), rec["outputs"]


class AutocastInside(torch.nn.Module):
    """A train step that enters autocast itself, inside the compiled code, around a checkpointed
    convolution block (as a diffusion UNet's training step does)."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.n = torch.nn.GroupNorm(2, 4)

    def block(self, x):
        return self.c(torch.nn.functional.silu(self.n(x)))

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
        return y.float().square().mean()


def test_a_graph_that_enters_autocast_itself_is_recorded_as_amp(parity_bin, tmp_path):
    """The autocast is entered inside the compiled code, not around the call: the graph was not
    recorded (torch.export ran the checkpointed convolution without the autocast, "Tensor dtype
    mismatch! Expected: torch.float32, Got: torch.bfloat16"; make_fx failed on the checkpoint),
    and a graph recorded so would have been judged at float32's tolerance. AOTAutograd records it,
    its amp dtype the graph's own, and it verifies at amp's tolerance."""
    torch.manual_seed(0)
    _, caught = dump(AutocastInside(), lambda f: f(torch.randn(2, 4, 8, 8)).backward(), tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert not m.get("skipped_graphs") and not caught, (m.get("skipped_graphs"), [str(w.message) for w in caught])
    assert m["graphs"][0]["mode"] == "train" and m["graphs"][0]["amp"] == "bfloat16", m["graphs"][0]
    r, (rec,) = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0 and rec["verification_code"] == "PASS", r.stdout + r.stderr
    assert rec["experiment"]["dtype"] == "amp" and rec["tolerance"] == 1e-2, rec["tolerance"]


class CheckpointedBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ConvBN()

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)


def test_a_graph_no_lowering_records_says_each_lowerings_reason(tmp_path):
    """BatchNorm trained inside a checkpointed block, under autocast: AOTAutograd's lowering meets
    a checkpointed region that writes its inputs, make_fx's functionalization fails on the
    checkpoint; the skipped graph's reason names both, the first saying what the graph holds."""
    torch.manual_seed(0)
    model = CheckpointedBN().train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dump(model, lambda f: f(torch.randn(2, 3, 8, 8)), tmp_path / "ckpt")
    (skipped,) = manifest(tmp_path / "ckpt")["skipped_graphs"]
    reason = skipped["reason"]
    assert reason.startswith("CaptureError: no lowering recorded the graph (aot: "), reason
    assert "invoke_subgraph writes its inputs" in reason and "; fx_trace: " in reason, reason


class PickedExpert(torch.nn.Module):
    """One of three experts chosen by an index the program passes (as a router's top choice)."""
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x, w, top):
        return self.experts[top](x) * w[..., top:top + 1]


@pytest.mark.parametrize("how", ["eval", "amp", "train"])
def test_an_index_specialized_after_a_recompile_is_no_input_of_the_dir(parity_bin, tmp_path, how):
    """Called with another index, dynamo recompiles with the index as a dynamic int, then
    specializes it again (the experts[top] lookup): the graph keeps its placeholder, which no node
    reads and which holds no value. Each lowering (export; AOTAutograd under autocast; a train
    graph) wrote it, and the manifest listed no input for it: the dir was refused ("graphs[1]:
    field "inputs" has no entry for placeholder"). It is left out; every graph verifies."""
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(4, 3, requires_grad=how == "train")

    def calls(f):
        for top in (1, 0, 2):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=how == "amp"):
                out = f(x, w, top)
            if how == "train":
                out.sum().backward()

    _, caught = dump(PickedExpert(), calls, tmp_path / "prog")
    m = manifest(tmp_path / "prog")
    assert len(m["graphs"]) == 3 and not m.get("skipped_graphs") and not caught, (m, [str(c.message) for c in caught])
    r, records = verify(parity_bin, tmp_path / "v", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0 and [rec["verification_code"] for rec in records] == ["PASS"], r.stdout + r.stderr
