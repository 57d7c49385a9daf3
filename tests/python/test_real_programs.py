"""Graphs real programs make (issue 30), captured with one line (`torch.compile(model,
backend=dump_backend(dir))`) and verified: training under autocast with the loss inside the
model, activation checkpointing, sizes used in arithmetic; bad dirs are bad input everywhere and
never stop the good dirs of the same run."""
import json
import os
import shutil

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from conftest import graph_json, manifest, verify, run_parity
from parity_capture import dump_backend


def compiled(model, out):
    torch._dynamo.reset()
    return torch.compile(model, backend=dump_backend(str(out)))


class AmpHead(torch.nn.Module):
    """Composite ops that autocast casts inside (einsum, tensordot: bf16 matmuls), the loss
    computed in the model (cross_entropy: float32 under autocast), dropout."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 10) / 4)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x, y):
        h = torch.einsum("ij,jk->ik", x, self.w)
        z = self.drop(h * torch.tensordot(x, self.w, dims=1))[:, :4]
        return F.cross_entropy(z, y), z


@pytest.fixture(scope="module")
def amp_train(tmp_path_factory):
    out = tmp_path_factory.mktemp("amp") / "prog"
    torch.manual_seed(0)
    model = AmpHead().train()
    step = compiled(model, out)
    with torch.autocast("cpu", torch.bfloat16):
        loss, z = step(torch.randn(8, 16), torch.randint(0, 4, (8,)))
    loss.backward()
    torch._dynamo.reset()
    assert (loss.dtype, z.dtype) == (torch.float32, torch.bfloat16)
    return out


def test_amp_training_records_what_the_program_ran(amp_train):
    (entry,) = manifest(amp_train)["graphs"]
    assert entry["mode"] == "train" and entry["amp"] == "bfloat16", entry
    g = graph_json(amp_train, entry)
    metas = {n["name"]: n.get("meta", {}).get("val") for n in g["nodes"]}
    out = next(n for n in g["nodes"] if n["op"] == "output")
    dtypes = [metas[a["node"]][0]["dtype"] for a in out["args"][0]]
    assert dtypes == ["float32", "bfloat16"], dtypes  # the float32 loss, the bf16 logits: as the program got them
    ops = {n.get("target") for n in g["nodes"]}
    assert "aten::einsum" not in ops and "aten::bmm" in ops or "aten::mm" in ops, ops  # the casts inside einsum are there
    assert any(n.get("meta", {}).get("stack_trace") for n in g["nodes"]), "ops keep their source lines"


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_amp_training_verifies_with_its_fp64_reference(parity_bin, amp_train, tmp_path, backend):
    r, records = verify(parity_bin, tmp_path, amp_train, "--backend", backend)
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = records
    assert rec["verification_code"] == "PASS" and rec["fp64_reference"] is True, rec
    paths = [o["path"] for o in rec["outputs"]]
    assert any("grad/param/w" in p for p in paths), paths


class Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = checkpoint(lambda t: torch.tanh(self.a(t)), x, use_reentrant=False)
        h = checkpoint(lambda t: torch.tanh(self.b(t)), h, use_reentrant=False)
        return self.head(h)


def test_a_checkpointed_train_step_is_recorded_and_verified_as_train(parity_bin, tmp_path):
    torch.manual_seed(0)
    model = Checkpointed()
    step = compiled(model, tmp_path / "prog")
    x, y = torch.randn(8, 16, requires_grad=True), torch.randint(0, 4, (8,))
    F.cross_entropy(step(x), y).backward()  # the loss outside the model
    torch._dynamo.reset()
    (entry,) = manifest(tmp_path / "prog")["graphs"]
    assert entry["mode"] == "train" and entry["tangents"][0], entry
    r, records = verify(parity_bin, tmp_path / "out", tmp_path / "prog", "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    paths = [o["path"] for o in records[0]["outputs"]]
    assert any("grad/param/a.weight" in p for p in paths) and any("grad/input/" in p for p in paths), paths


class TimesBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * x.shape[0] + x.shape[0] / 2  # sizes in Tensor and Scalar positions


@pytest.fixture(scope="module")
def times_batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("sizes") / "prog"
    torch.manual_seed(0)
    step = compiled(TimesBatch(), out)
    with torch.no_grad():
        for n in (8, 8, 5, 3):  # dynamo's automatic dynamic shapes: the second shape recompiles symbolic
            step(torch.randn(n, 4))
    torch._dynamo.reset()
    return out


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_sizes_flow_into_tensor_arguments(parity_bin, times_batch, tmp_path, backend):
    assert any(graph_json(times_batch, e).get("symbols") for e in manifest(times_batch)["graphs"])
    r, records = verify(parity_bin, tmp_path, times_batch, "--backend", backend, "--shapes", "sweep")
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["verification_code"] == "PASS" and records[0]["fp64_reference"] is True, records


HOSTILE = {
    "deep parentheses": lambda s: "(" * 20000 + s + ")" * 20000 + " >= 2",
    "a deep chain": lambda s: s + " + 1" * 20000 + " >= 2",
    "division by zero": lambda s: f"{s} // ({s} - {s}) >= 0",
    "int64 overflow": lambda s: f"{s} * 99999999999999999999 >= 0",
    "a huge power": lambda s: f"{s} ** 100000 >= 0",
    "false at the recorded call": lambda s: f"Eq({s}, 1)",
}


@pytest.mark.parametrize("what", list(HOSTILE))
def test_hostile_size_expressions_are_bad_input_in_every_command(parity_bin, times_batch, tmp_path, what):
    bad = tmp_path / "bad"
    shutil.copytree(times_batch, bad)
    entry = next(e for e in manifest(bad)["graphs"] if graph_json(bad, e).get("symbols"))
    g = graph_json(bad, entry)
    g["guards"] = [HOSTILE[what](next(iter(g["symbols"])))]
    with open(os.path.join(str(bad), entry["file"]), "w") as f:
        json.dump(g, f)
    for cmd in (["repro", "run", bad], ["verify", bad, "--backend", "eager", "--output-dir", tmp_path / "v"],
                ["minify", bad, "--backend", "eager", "--out", tmp_path / "m"]):
        r = run_parity(parity_bin, *map(str, cmd))
        assert r.returncode == 2, (what, cmd, r.returncode, r.stdout + r.stderr)
        assert f"{entry['file']}: guards[0]" in r.stderr, r.stderr


def test_a_bad_dir_among_good_ones_is_reported_and_the_others_verify(parity_bin, times_batch, amp_train, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(times_batch, bad)
    os.remove(os.path.join(str(bad), "tensors.safetensors"))
    r, records = verify(parity_bin, tmp_path / "out", times_batch, bad, amp_train, "--backend", "eager")
    assert r.returncode == 2, r.stdout + r.stderr
    assert [rec["verification_code"] for rec in records] == ["PASS", "PASS"], records
    assert f"not verified (bad input): {bad}" in r.stdout and "tensors.safetensors" in r.stdout, r.stdout


class TwoOptimizers:
    """Two optimizers over the model's layers, stepped by one compiled function: dynamo names
    both one's and the other's first parameter `self___param_groups_0__params___0`, and the
    second graph's tensor took the first's key ("tensor is float32[8, 8] but node expects
    float32[2, 8]")."""

    def __init__(self, params):
        params = list(params)
        self.a = torch.optim.SGD(params[:2], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
        self.b = torch.optim.Adam(params[2:], lr=0.01, amsgrad=True)

    def step(self):
        self.a.step()
        self.b.step()

    def zero_grad(self):
        self.a.zero_grad()
        self.b.zero_grad()


OPTIMIZERS = {
    "sgd-foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    "adam-foreach": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01),
    "two-optimizers": TwoOptimizers,
}


@pytest.fixture(scope="module")
def optimizer_steps(tmp_path_factory):
    """A compiled optimizer.step() of each kind, called three times in a training loop."""
    dirs = {}
    for kind, make in OPTIMIZERS.items():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        opt = make(model.parameters())
        dirs[kind] = tmp_path_factory.mktemp(kind) / "prog"
        step = compiled(opt.step, dirs[kind])
        for _ in range(3):
            model(torch.randn(4, 8)).pow(2).sum().backward()
            step()
            opt.zero_grad()
        torch._dynamo.reset()
    return dirs


@pytest.mark.parametrize("kind,backend", [("sgd-foreach", "eager"), ("sgd-foreach", "inductor"), ("adam-foreach", "eager"),
                                          ("adamw", "eager"), ("adamw", "aot_eager"), ("adamw", "inductor"),
                                          ("two-optimizers", "eager")])
def test_a_compiled_optimizer_step_verifies_what_it_writes(parity_bin, optimizer_steps, tmp_path, kind, backend):
    d = optimizer_steps[kind]
    names = [n for e in manifest(d)["graphs"] for n in e["output_names"]]
    assert any(n.startswith("mutated/param/") for n in names), names  # the parameters it updates
    if kind != "sgd-foreach":
        assert any(n.startswith("mutated/buffer/") for n in names), names  # and the optimizer state
    r, records = verify(parity_bin, tmp_path, d, "--backend", backend)
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["verification_code"] == "PASS" and records[0]["fp64_reference"] is True, records


def test_a_wrong_optimizer_update_fails_on_the_parameter_it_writes(parity_bin, optimizer_steps, tmp_path):
    r, records = verify(parity_bin, tmp_path, optimizer_steps["adamw"], "--backend", "fault",
                        "--backend-option", "op=aten::addcdiv")
    assert r.returncode == 1, r.stdout + r.stderr
    failing = [o["path"] for o in records[0]["outputs"] if not o["pass"]]
    assert failing and all("mutated/" in p for p in failing), failing


class DataDependent(torch.nn.Module):
    """Values the graph makes from data, as dynamo records them with capture_scalar_outputs and
    capture_dynamic_output_shape_ops: `.item()` of a float and of an int, `nonzero`'s size, and
    numbers the compiled code returns."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        scale = h.abs().max().item()
        count = (h > 0).sum().item()
        picked = torch.nonzero(h > 0.1)
        return h / scale, picked.float().sum(0), count, scale


@pytest.fixture(scope="module")
def data_dependent(tmp_path_factory):
    out = tmp_path_factory.mktemp("dd") / "prog"
    torch.manual_seed(0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        step = compiled(DataDependent(), out)
        with torch.no_grad():
            for n in (8, 5):  # the second batch size makes a symbolic graph too
                step(torch.randn(n, 8))
    torch._dynamo.reset()
    return out


def test_data_dependent_values_are_recorded_as_unbacked_symbols(data_dependent):
    m = manifest(data_dependent)
    assert len(m["graphs"]) == 2 and not m.get("skipped_graphs"), m
    for entry in m["graphs"]:
        symbols = graph_json(data_dependent, entry)["symbols"]
        unbacked = {k: s for k, s in symbols.items() if s.get("unbacked")}
        assert any(isinstance(s["hint"], float) for s in unbacked.values()), symbols  # .item() of a float
        assert any(isinstance(s["hint"], int) for s in unbacked.values()), symbols   # nonzero's size, an int .item()
        assert len(entry["expected_outputs"]) == 4, entry  # the numbers returned are outputs too


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_data_dependent_graphs_verify(parity_bin, data_dependent, tmp_path, backend):
    r, records = verify(parity_bin, tmp_path, data_dependent, "--backend", backend)
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["verification_code"] == "PASS" and records[0]["fp64_reference"] is True, records


def test_a_wrong_value_in_a_data_dependent_graph_fails(parity_bin, data_dependent, tmp_path):
    r, records = verify(parity_bin, tmp_path, data_dependent, "--backend", "inductor",
                        "--backend-option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy")
    assert r.returncode == 1, r.stdout + r.stderr
    assert records[0]["verification_code"] == "FAIL", records


class AttentionLoss(torch.nn.Module):
    """Attention as models call it (F.scaled_dot_product_attention, a mask and a causal one),
    the loss computed in the compiled code and backward() called on it directly, a second output
    no gradient reaches."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).view(2, 8, 3, 4, 8).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return a.float().pow(2).mean(), F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)


@pytest.fixture(scope="module")
def attention_loss(tmp_path_factory):
    out = tmp_path_factory.mktemp("attn") / "prog"
    torch.manual_seed(0)
    step = compiled(AttentionLoss(), out)
    with torch.autocast("cpu", torch.bfloat16):
        loss, _ = step(torch.randn(2, 8, 32), torch.randn(8, 8))
    loss.backward()  # on the graph's own output: the root of the backward
    torch._dynamo.reset()
    return out


def test_the_loss_backward_is_called_on_is_recorded_as_train(attention_loss):
    (entry,) = manifest(attention_loss)["graphs"]
    assert entry["mode"] == "train", entry
    assert entry["tangents"][0] and entry["tangents"][1] is None, entry  # no gradient reached the second output


def test_the_attention_kernel_dispatch_picked_is_recorded_as_the_attention(attention_loss):
    (entry,) = manifest(attention_loss)["graphs"]
    targets = [n.get("target", "") for n in graph_json(attention_loss, entry)["nodes"]]
    assert targets.count("aten::scaled_dot_product_attention") == 2, targets
    assert not any(t.startswith("aten::_scaled_dot_product") for t in targets), targets


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_attention_training_verifies(parity_bin, attention_loss, tmp_path, backend):
    r, records = verify(parity_bin, tmp_path, attention_loss, "--backend", backend)
    assert r.returncode == 0, r.stdout + r.stderr
    assert records[0]["verification_code"] == "PASS" and records[0]["fp64_reference"] is True, records
    assert any("grad/param/qkv.weight" in o["path"] for o in records[0]["outputs"]), records[0]["outputs"]
