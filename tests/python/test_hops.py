"""Higher-order ops (issue 32): graphs with subgraphs, captured from real programs with one line
(`torch.compile(model, backend=dump_backend(dir))`, and capture()), written as format version 3,
run by parity's interpreter through their subgraphs (cond, while_loop, flex_attention,
invoke_subgraph, map, scan, associative_scan), verified on eager and inductor with their fp64 reference, and minified inside
the subgraphs: a wrong relu inside a cond branch and inside a checkpointed block ends at the
relu. Version-2 dirs load unchanged; an op parity cannot run is named."""
import json
import os
import shutil

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.utils.checkpoint import checkpoint

from conftest import graph_json, manifest, run_parity, stamp_version, verify
from parity_capture import capture, dump_backend


def dumped(model, out, *calls, train=False, amp=False):
    """`model` compiled with the dump backend, called on each args tuple of `calls` (under
    autocast to bfloat16 with `amp`)."""
    torch._dynamo.reset()
    step = torch.compile(model, backend=dump_backend(str(out)))
    for args in calls:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            if train:
                step(*args).float().pow(2).mean().backward()
            else:
                with torch.no_grad():
                    step(*args)
    torch._dynamo.reset()
    return out


def hop_targets(d):
    targets = []

    def walk(g):
        targets.extend(n.get("target", "") for n in g["nodes"] if n.get("target", "").startswith("hop::"))
        for sub in (g.get("subgraphs") or {}).values():
            walk(sub)
    for e in manifest(d)["graphs"]:
        walk(graph_json(d, e))
    return targets


class CondNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.cond(h.mean() > -10, lambda t: torch.relu(t * 3) - 0.5, lambda t: t.sin(), (h,))
        return self.b(h)


def causal(b, h, q, kv):
    return q >= kv


class FlexNet(torch.nn.Module):
    """Attention as new LLM code writes it: flex_attention with a score function reading a
    parameter (ALiBi-style) and a causal block mask."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.slopes = torch.nn.Parameter(torch.linspace(0.05, 0.2, 4))

    def forward(self, x, block_mask):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, 4, 8).permute(2, 0, 3, 1, 4)
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)
        # a view of the output legal only on the layout torch's flex_attention gives it (the query's)
        return flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask).transpose(1, 2).reshape(B, T, 32)


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.relu(x @ w) + 1


class Repeated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8) / 3)

    def forward(self, x):
        return block(block(x, self.w), self.w)


class Loop(torch.nn.Module):
    def forward(self, x):
        def cond_fn(i, y):
            return i < 4

        def body_fn(i, y):
            return i + 1, torch.tanh(y * 1.5 + 0.1)
        return torch.ops.higher_order.while_loop(cond_fn, body_fn, (torch.tensor(0), x), ())[1]


class Recurrent(torch.nn.Module):
    """An RNN written with torch's scan: the carry through a step function over time."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8) / 3)

    def forward(self, h0, xs):
        from torch._higher_order_ops.scan import scan

        def step(h, x):
            h2 = torch.tanh(h @ self.w + x)
            return h2, h2 * 2
        return scan(step, h0, xs)


class LinearRecurrence(torch.nn.Module):
    """h_t = a_t * h_(t-1) + b_t over time, as linear RNNs write it: an associative scan of the
    pairs (a, b), which combine as (a1 * a2, b1 * a2 + b2)."""

    def __init__(self):
        super().__init__()
        self.gate, self.inp = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, xs):  # (time, batch, 8)
        a, b = torch.sigmoid(self.gate(xs)), self.inp(xs)

        def combine(a1, b1, a2, b2):
            return a1 * a2, b1 * a2 + b2
        return torch.ops.higher_order.associative_scan(combine, (a, b), ())[1]


class CheckpointedBlocks(torch.nn.Module):
    """Two checkpointed residual blocks, the second holding a checkpointed block of its own."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(16, 16) for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def inner(self, x):
        return F.gelu(self.c(x)) + x

    def outer(self, x):
        return checkpoint(self.inner, torch.tanh(self.b(x)), use_reentrant=False)

    def forward(self, x):
        h = checkpoint(lambda t: F.gelu(self.a(t)) + t, x, use_reentrant=False)
        return self.head(checkpoint(self.outer, h, use_reentrant=False))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hops")
    bm = create_block_mask(causal, 1, 1, 128, 128, device="cpu")
    return {
        "cond": dumped(CondNet(), root / "cond", (torch.randn(8, 16),)),
        "cond-dynamic": dumped(CondNet(), root / "cond-dynamic", *[(torch.randn(n, 16),) for n in (8, 8, 5)]),
        "cond-train": dumped(CondNet(), root / "cond-train", (torch.randn(8, 16),), train=True),
        "flex": dumped(FlexNet(), root / "flex", (torch.randn(2, 128, 32), bm)),
        "invoke": dumped(Repeated(), root / "invoke", (torch.randn(4, 8),)),
        "while": capture(Loop(), (torch.randn(4, 8),), str(root / "while")),
        "scan": capture(Recurrent(), (torch.randn(2, 8), torch.randn(5, 2, 8)), str(root / "scan")),
        "ascan": capture(LinearRecurrence(), (torch.randn(7, 2, 8),), str(root / "ascan")),
        "ckpt-train": dumped(CheckpointedBlocks(), root / "ckpt-train", (torch.randn(8, 16, requires_grad=True),), train=True),
        "ckpt-dynamic": dumped(CheckpointedBlocks(), root / "ckpt-dynamic", *[(torch.randn(n, 16),) for n in (8, 8, 5)]),
        "ckpt-amp": dumped(CheckpointedBlocks(), root / "ckpt-amp", (torch.randn(8, 16),), train=True, amp=True),
        "ckpt-capture": capture(CheckpointedBlocks(), (torch.randn(8, 16),), str(root / "ckpt-capture"), mode="train",
                                loss_fn=lambda out: out.pow(2).mean()),
    }


EXPECTED_OPS = {"cond": "hop::cond", "cond-dynamic": "hop::cond", "cond-train": "hop::cond",
                "flex": "hop::flex_attention", "invoke": "hop::invoke_subgraph", "while": "hop::while_loop",
                "scan": "hop::scan", "ascan": "hop::associative_scan",
                "ckpt-train": "hop::tag_activation_checkpoint", "ckpt-dynamic": "hop::tag_activation_checkpoint", "ckpt-capture": "hop::tag_activation_checkpoint", "ckpt-amp": "hop::tag_activation_checkpoint"}


@pytest.mark.parametrize("name", list(EXPECTED_OPS))
def test_higher_order_ops_are_recorded_with_their_subgraphs(programs, name):
    d = programs[name]
    m = manifest(d)
    assert not m.get("skipped_graphs"), m.get("skipped_graphs")
    assert m["version"] == 3
    assert EXPECTED_OPS[name] in hop_targets(d), hop_targets(d)
    if name in ("cond-train", "ckpt-train", "ckpt-amp", "ckpt-capture"):
        assert m["graphs"][0]["mode"] == "train", m["graphs"][0]
    if name.startswith("ckpt"):  # the nested block is a checkpoint call inside the outer one's body
        assert hop_targets(d).count("hop::tag_activation_checkpoint") == 3 * len(m["graphs"]), hop_targets(d)
    if name.endswith("dynamic"):
        assert any(graph_json(d, e).get("symbols") for e in m["graphs"])


@pytest.fixture(scope="module")
def verified(parity_bin, programs, tmp_path_factory):
    """Every program with eager and inductor, in one verify run (the symbolic ones across their
    ranges: --shapes sweep=2 leaves static graphs at their shapes): its records by (dir, backend).
    With Inductor's vector ISA, unlike the suite's other Inductor runs (tests/CMakeLists.txt): the
    one way Inductor lowers flex_attention on the CPU is at::vec's."""
    out = tmp_path_factory.mktemp("hops-verify")
    vector_isa = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_VEC_ISA_OK"}
    r, records = verify(parity_bin, out, *programs.values(), "--backend", "eager", "--backend", "inductor",
                        "--shapes", "sweep=2", "-j", "2", env=vector_isa)
    assert records, r.stdout + r.stderr
    return {(rec["repro_input"], rec["experiment"]["backend"]): rec for rec in records}


# Inductor generates associative_scan with Triton only (on the CPU it raises "Unable to generate
# code for associative_scan op": the backend's EXCEPTION_RAISED, recorded as such).
@pytest.mark.parametrize("name,backend", [(n, b) for n in EXPECTED_OPS for b in ("eager", "inductor")])
def test_higher_order_ops_verify(programs, verified, name, backend):
    rec = verified[(os.path.abspath(str(programs[name])), backend)]
    if (name, backend) == ("ascan", "inductor"):
        assert rec["verification_code"] == "EXCEPTION_RAISED" and "associative_scan" in rec["error"], rec
        return
    assert rec["verification_code"] == "PASS" and rec["fp64_reference"] is True, rec


def test_aot_eager_compiles_them_too(parity_bin, programs, tmp_path):
    r, records = verify(parity_bin, tmp_path, programs["while"], programs["cond"], programs["ascan"], "--backend", "aot_eager")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [rec["verification_code"] for rec in records] == ["PASS", "PASS", "PASS"], records


def _backward_of(d):
    """The backward AOTAutograd's default partitioner (aot_eager's) makes of the recorded graph:
    what a backend replaying it is handed."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from parity_capture.standalone import load_dir
    _, gm, inputs = load_dir(str(d))
    graphs = {}

    def keep(kind):
        def compiler(g, _):
            graphs[kind] = g
            return g
        return compiler
    xs = [x.detach().requires_grad_(x.is_floating_point()) for x in inputs]
    out = aot_module_simplified(gm, xs, fw_compiler=keep("fw"), bw_compiler=keep("bw"))(*xs)
    out[0].float().sum().backward()
    return [str(n.target) for n in graphs["bw"].graph.nodes if n.op == "call_function"]


def test_a_backend_recomputes_the_checkpointed_blocks_in_its_backward(programs, tmp_path):
    """The recorded checkpoint calls are what a backend differentiates: its partitioner recomputes
    the blocks' forward ops (their linear layers' addmm) in the backward, as the program's own compile did; the same
    program without checkpointing saves them instead."""
    assert "aten.addmm.default" in _backward_of(programs["ckpt-train"])

    class Plain(CheckpointedBlocks):
        def forward(self, x):
            h = F.gelu(self.a(x)) + x
            return self.head(self.inner(torch.tanh(self.b(h))))
    torch.manual_seed(0)
    plain = dumped(Plain(), tmp_path / "plain", (torch.randn(8, 16, requires_grad=True),), train=True)
    assert "aten.addmm.default" not in _backward_of(plain)


def test_profile_times_the_checkpointed_blocks_as_the_program_ran_them(parity_bin, programs, tmp_path):
    """`parity profile`'s eager step runs the recorded checkpoint calls as torch.utils.checkpoint
    (checkpointed.as_eager_calls), not through torch's own eager of the call, whose selective-
    checkpoint dispatch mode (a Python dispatch of every op: profiler rows "PythonDispatchMode")
    the program never ran; the backend compiles the calls as recorded."""
    r = run_parity(parity_bin, "profile", str(programs["ckpt-train"]), "--backend", "aot_eager", "--warmup", "1",
                   "--iterations", "2", "--profile-iterations", "1", "--json", "--output-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    eager = [row["name"] for row in report["eager_breakdown"]["rows"]]
    assert any("addmm" in n for n in eager), eager
    assert not any("DispatchMode" in n for n in eager), eager
    assert report["speed"]["backend"]["samples"] == 2, report["speed"]


def test_capture_of_a_checkpointed_train_step_leaves_the_model_as_it_was(tmp_path):
    """capture() records a checkpointed train step through torch.compile (above); the model's
    gradients are untouched, as capture() of any model leaves them."""
    torch.manual_seed(0)
    model = CheckpointedBlocks()
    capture(model, (torch.randn(8, 16),), str(tmp_path / "c"), mode="train", loss_fn=lambda out: out.pow(2).mean())
    assert all(p.grad is None for p in model.parameters())
    assert manifest(tmp_path / "c")["mode"] == "train"


def test_flex_attention_replays_as_pytorchs_eager_flex_attention(parity_bin, programs):
    """The interpreter's flex_attention against the output Python's eager flex_attention gave at
    capture: its math definition, step for step."""
    r = run_parity(parity_bin, "repro", "run", str(programs["flex"]), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (g,) = json.loads(r.stdout)["graphs"]
    assert g["pass"] and g["fp64_reference"], g
    assert all(o["rule"] in ("bitwise", "allclose") for o in g["outputs"]), g["outputs"]


# A wrong relu wherever the graph calls one, inside subgraphs too, as a compiler's bug would make it:
# the fault backend (what is checked is how the reducer walks into subgraphs; Inductor's own relu
# knob through the whole minify is test_minify.py's, and its compile per candidate would triple
# these tests' time).
WRONG_RELU = ["--backend", "fault", "--backend-option", "op=aten::relu", "--no-stage-bisect"]


def test_a_relu_bug_inside_a_cond_branch_minifies_to_the_relu(parity_bin, tmp_path):
    torch.manual_seed(0)
    capture(CondNet(), (torch.randn(8, 16),), str(tmp_path / "cond"))
    r = run_parity(parity_bin, "minify", str(tmp_path / "cond"), "--out", str(tmp_path / "m"), *WRONG_RELU)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert [c["target"] for c in s["culprit_ops"]] == ["aten::relu"], s["graph_text"]
    assert s["inlined"] == ["cond"] and "inlined %cond" in r.stdout, r.stdout
    assert s["culprit"]["target"] == "aten::relu", s["culprit"]  # located inside the branch, not at the cond


class Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        h = checkpoint(lambda t: torch.relu(self.a(t)) * 2, x, use_reentrant=False)
        return self.b(torch.tanh(h))


def test_a_relu_bug_inside_a_checkpointed_block_minifies_to_the_relu(parity_bin, tmp_path):
    torch.manual_seed(0)
    dumped(Checkpointed(), tmp_path / "ckpt", (torch.randn(8, 16),), train=True)
    assert manifest(tmp_path / "ckpt")["graphs"][0]["mode"] == "train"
    assert hop_targets(tmp_path / "ckpt") == ["hop::tag_activation_checkpoint"]
    r = run_parity(parity_bin, "minify", str(tmp_path / "ckpt"), "--out", str(tmp_path / "m"), *WRONG_RELU)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert "aten::relu" in [c["target"] for c in s["culprit_ops"]] and len(s["culprit_ops"]) <= 3, s["graph_text"]
    assert s["inlined"] == ["checkpoint"], s  # reduced inside the block: its call inlined on the way


@pytest.mark.parametrize("name,op", [("scan", "aten::tanh"), ("while", "aten::"), ("ckpt-train", "aten::gelu"),
                                     ("cond", "aten::")])
def test_a_fault_in_an_op_inside_a_subgraph_is_injected(parity_bin, programs, tmp_path, name, op):
    # The fault backend reaches ops inside higher-order ops' subgraphs, as a compiler's bug does.
    g = graph_json(programs[name], manifest(programs[name])["graphs"][0])
    outside = {n.get("target") for n in g["nodes"]}
    inner = sorted({n["target"] for sg in g.get("subgraphs", {}).values() for n in sg["nodes"]
                    if n["op"] == "call_function" and n["target"].startswith(op) and n["target"] not in outside})
    assert inner, name  # an op only the subgraphs call
    r, records = verify(parity_bin, tmp_path, programs[name], "--backend", "fault", "--backend-option", f"op={inner[-1]}",
                        "--backend-option", "delta=0.5")
    (rec,) = records
    assert rec["verification_code"] == "FAIL", (inner[-1], rec)


def test_a_version_2_dir_loads_unchanged(parity_bin, programs, tmp_path):
    """A dir written before subgraphs (version 2, no subgraphs) replays as it did."""
    d = tmp_path / "v2"
    torch.manual_seed(0)
    capture(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), (torch.randn(4, 8),), str(d))
    stamp_version(d, 2)
    r = run_parity(parity_bin, "repro", "run", str(d))
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_a_higher_order_op_parity_cannot_run_is_named(parity_bin, programs, tmp_path):
    d = tmp_path / "future"
    shutil.copytree(programs["cond"], d)
    e = manifest(d)["graphs"][0]
    g = graph_json(d, e)
    for n in g["nodes"]:
        if n.get("target") == "hop::cond":
            n["target"] = "hop::a_future_op"
    json.dump(g, open(os.path.join(str(d), e["file"]), "w"))
    r = run_parity(parity_bin, "repro", "run", str(d))  # refused when the file is read (repro/hop_check.h)
    assert r.returncode == 2 and "hop::a_future_op is no higher-order op parity knows" in r.stderr, r.stdout + r.stderr


def test_an_op_with_side_effects_is_recorded_as_its_call(parity_bin, tmp_path):
    """An op torch runs for its effect (aten::_print: the effect-token wrapper with_effects, which
    the lowering removes) is a plain call in the recorded graph, in program order, and replays."""
    def f(x):
        torch.ops.aten._print("parity effect test")
        return x.sin() + 1
    d = dumped(f, tmp_path / "effect", (torch.randn(4),))
    g = graph_json(d, manifest(d)["graphs"][0])
    targets = [n.get("target") for n in g["nodes"] if n["op"] == "call_function"]
    assert targets[0] == "aten::_print" and not any(t.startswith("hop::") for t in targets), targets
    r = run_parity(parity_bin, "repro", "run", str(d))
    assert r.returncode == 0 and "PASS" in r.stdout and "parity effect test" in r.stdout + r.stderr, r.stdout + r.stderr
