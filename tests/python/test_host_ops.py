"""Graphs with Python-registered custom ops (host ops): capture records them; nothing is imported
without approval; approved ones verify (eval and train), minify and show."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import run_parity

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from custom_op_model import capture_custom, scaled_gelu  # noqa: E402

OP = "parity_test::scaled_gelu"


def parity(parity_bin, *args, pythonpath=HERE, home=None, config=None):
    """parity with PYTHONPATH `pythonpath`, its config found under `home` ($HOME/.config/parity)
    or named by `config` ($PARITY_CONFIG, which keeps the suite's warm workers: a HOME of the
    test's own is another worker's environment, runtime/worker_pool.h)."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    if home:
        env["HOME"] = home
        env.pop("XDG_CONFIG_HOME", None)
        env.pop("PARITY_CONFIG", None)
    if config:
        env["PARITY_CONFIG"] = config
    return run_parity(parity_bin, *args, env=env)


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    return capture_custom(str(tmp_path_factory.mktemp("cop") / "cop"))


@pytest.fixture(scope="module")
def custom_train(tmp_path_factory):
    return capture_custom(str(tmp_path_factory.mktemp("copt") / "copt"), "train")


def results(out_dir):
    return [json.loads(line) for line in open(os.path.join(out_dir, "results.jsonl"))]


def test_capture_records_the_host_op_and_its_module(custom):
    m = json.load(open(os.path.join(custom, "manifest.json")))
    assert m["host_ops"][OP]["module"] == "custom_op_model"
    assert m["host_ops"][OP]["schema"].startswith(OP + "(Tensor x, float scale)")


def test_custom_op_model_verifies_on_every_backend(parity_bin, custom, tmp_path):
    r = parity(parity_bin, "verify", custom, "--backend", "eager", "--backend", "aot_eager", "--backend", "inductor",
               "--import", "custom_op_model", "--output-dir", str(tmp_path / "v"), "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l["verification_code"] for l in results(tmp_path / "v")] == ["PASS"] * 3


def test_train_gradients_flow_through_the_host_op(parity_bin, custom_train, tmp_path):
    # At a tolerance far below the error a missing gradient makes (~1e-3), eager == inductor.
    r = parity(parity_bin, "verify", custom_train, "--backend", "inductor", "--tol", "1e-6", "--import", "custom_op_model",
               "--output-dir", str(tmp_path / "v"), "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0, r.stdout + r.stderr
    grads = {o["path"]: o for o in results(tmp_path / "v")[0]["outputs"] if o["path"].startswith("grad/")}
    assert grads["grad/param/model.lin1.weight"]["pass"]  # upstream of the host op


class TwoCalls(torch.nn.Module):
    """The host op twice, apart (two requests), with one scale on tensors of one shape: the
    second call repeats the first one's plan on new values."""

    def forward(self, x):
        h = scaled_gelu(x, 0.5)
        return scaled_gelu(h * 3.0 + 1.0, 0.5)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_a_repeated_host_op_call_computes_on_its_new_values(parity_bin, tmp_path, device):
    # Regression (issue 23): a plan's arguments for another device were the copies made when it
    # was prepared, so a repeat on CUDA computed on the first call's values.
    from parity_capture import capture
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0)).to(device)
    d = capture(TwoCalls().to(device), (x,), str(tmp_path / "two"), name="two_calls")
    r = parity(parity_bin, "repro", "run", d, "--device", device, "--import", "custom_op_model", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["pass"], r.stdout


def test_unapproved_module_imports_nothing(parity_bin, custom, tmp_path):
    # A manifest may name any module; one that writes a file when imported must stay unimported.
    evil = tmp_path / "site"
    evil.mkdir()
    marker = tmp_path / "imported.txt"
    (evil / "evil_mod.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    d = tmp_path / "repro"
    subprocess.run(["cp", "-r", custom, str(d)], check=True)
    m = json.load(open(d / "manifest.json"))
    m["host_ops"][OP]["module"] = "evil_mod"
    (d / "manifest.json").write_text(json.dumps(m))
    for args in (["verify", str(d), "--backend", "eager", "--output-dir", str(tmp_path / "v")],
                 ["repro", "run", str(d)], ["minify", str(d), "--backend", "fault", "--out", str(tmp_path / "m")]):
        r = parity(parity_bin, *args, pythonpath=f"{evil}:{HERE}", home=str(tmp_path))
        assert r.returncode == 2, (args, r.stdout + r.stderr)
        assert OP in r.stderr and "evil_mod" in r.stderr and "--import evil_mod" in r.stderr, r.stderr
    assert not marker.exists()


def test_missing_module_is_exit_2_naming_op_node_and_module(parity_bin, custom, tmp_path):
    d = tmp_path / "repro"
    subprocess.run(["cp", "-r", custom, str(d)], check=True)
    m = json.load(open(d / "manifest.json"))
    m["host_ops"][OP]["module"] = "no_such_module_xyz"
    (d / "manifest.json").write_text(json.dumps(m))
    cfg = tmp_path / ".config" / "parity"
    cfg.mkdir(parents=True)
    (cfg / "config.json").write_text(json.dumps({"allowed_imports": ["no_such_module_xyz"]}))
    for args in (["verify", str(d), "--backend", "eager", "--output-dir", str(tmp_path / "v")], ["repro", "run", str(d)]):
        # approved by --import: every process imports it before anything runs, so the module is
        # named before the graph is read
        r = parity(parity_bin, *args, "--import", "no_such_module_xyz")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--import no_such_module_xyz: cannot import it: ModuleNotFoundError" in r.stderr, r.stderr
        # approved by the config's allow-list: the host op that needs it is named with its node
        r = parity(parity_bin, *args, home=str(tmp_path))
        assert r.returncode == 2, r.stdout + r.stderr
        assert OP in r.stderr and "%scaled_gelu" in r.stderr and "no_such_module_xyz" in r.stderr, r.stderr


def test_config_allow_list_approves(parity_bin, custom, tmp_path):
    cfg = tmp_path / ".config" / "parity"
    cfg.mkdir(parents=True)
    (cfg / "config.json").write_text(json.dumps({"allowed_imports": ["custom_op_model"]}))
    r = parity(parity_bin, "repro", "run", custom, home=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    (cfg / "config.json").write_text('{"allowed_imports": "custom_op_model"}')
    r = parity(parity_bin, "repro", "run", custom, home=str(tmp_path))
    assert r.returncode == 2 and "allowed_imports" in r.stderr and "config.json" in r.stderr


@pytest.mark.parametrize("op", [OP, "aten::tanh"])
def test_fault_minifies_to_the_faulty_op_among_host_ops(parity_bin, custom, tmp_path, op):
    """Approved by the allow-list of the config $PARITY_CONFIG names. The minimum lists the host op
    only where it still calls it, and its repro.py imports the op's module as parity found it (from
    the directory parity ran in, here the one holding custom_op_model.py, with no PYTHONPATH)."""
    (tmp_path / "config.json").write_text(json.dumps({"allowed_imports": ["custom_op_model"]}))
    r = parity(parity_bin, "minify", custom, "--backend", "fault", "--backend-option", f"op={op}", "-j", "2",
               "--out", str(tmp_path / "m"), config=str(tmp_path / "config.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert [c["target"] for c in s["culprit_ops"]] == [op]
    assert s["signature"]["kind"] == "accuracy" and s["culprit"]["target"] == op
    minified = s["minified_dir"]
    host_ops = json.load(open(os.path.join(minified, "manifest.json"))).get("host_ops", {})
    script = open(os.path.join(minified, "repro.py")).read()
    assert list(host_ops) == ([OP] if op == OP else []), host_ops
    assert ("import custom_op_model" in script) == (op == OP), script[:2000]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, os.path.join(minified, "repro.py")], capture_output=True, text=True, env=env, cwd=HERE)
    assert p.returncode == 2 and "runs in parity's C++ runtime" in p.stdout, p.stdout + p.stderr  # (fault: no dynamo backend)


def test_repro_show_marks_host_ops(parity_bin, custom):
    r = run_parity(parity_bin, "repro", "show", custom)
    assert r.returncode == 0
    assert f"# host op {OP}" in r.stdout and "module custom_op_model" in r.stdout
    assert any(line.endswith("# host op") and OP in line for line in r.stdout.splitlines())


def test_dynamo_dump_of_a_tiny_mixtral_verifies(parity_bin, tmp_path):
    # transformers' MoE experts run in its custom op grouped_mm_fallback (registered from Python).
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    from parity_capture import dump_backend
    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64)
    cfg.use_cache = False
    model = MixtralForCausalLM(cfg).eval()
    out = str(tmp_path / "mixtral")
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=dump_backend(out, "tiny_mixtral"))(torch.randint(0, 128, (2, 8)))
    torch._dynamo.reset()
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["host_ops"]["transformers::grouped_mm_fallback"]["module"] == "transformers.integrations.moe"
    # The dump's dir replays through the host op. (aot_eager's path through host ops is
    # test_custom_op_model_verifies_on_every_backend's; Inductor's through this one, eval and
    # train, test_suite_moe_model_passes_eval_and_train_with_inductor's.)
    r = parity(parity_bin, "verify", out, "--backend", "eager",
               "--import", "transformers.integrations.moe", "--output-dir", str(tmp_path / "v"),
               "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l["verification_code"] for l in results(tmp_path / "v")] == ["PASS"]


def test_suite_moe_model_trains_with_gradients_through_its_host_op(parity_bin, tmp_path):
    # The suite approves its own modules (transformers.integrations.moe registers the experts' op).
    # aot_eager: what is checked is the experts' gradients through the host op in a compiled
    # backward (Inductor through a host op, eval and train: the custom-op tests above).
    r = parity(parity_bin, "verify", "--model", "mixtral", "--backend", "aot_eager", "--test", "train",
               "--tol", "1e-4", "--output-dir", str(tmp_path / "v"), "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = results(tmp_path / "v")
    assert [l["verification_code"] for l in lines] == ["PASS"]
    train = {o["path"]: o for o in lines[0]["outputs"]}
    experts = [p for p in train if p.startswith("grad/") and "experts" in p]
    assert experts and all(train[p]["pass"] for p in experts)  # gradients through the host op


def test_custom_ops_that_write_their_arguments_verify(parity_bin, tmp_path):
    """Custom ops with mutates_args (a KV-cache write returning a value; an in-place scale of a
    view of a buffer returning nothing), which functionalization records as auto_functionalized
    (v2, with the view regenerated from its base): recorded by both front doors as the clones the
    ops write and their own calls, the buffers' values before the call as inputs and (dump
    backend) their values after it as outputs; the interpreter writes the clones through the
    worker; eager, aot_eager and inductor verify."""
    from mutating_op_model import CacheNet
    from parity_capture import capture, dump_backend
    torch.manual_seed(0)
    x = torch.randn(2, 16)
    dirs = {"capture": capture(CacheNet(), (x,), str(tmp_path / "cap"))}
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(CacheNet(), backend=dump_backend(str(tmp_path / "dump")))(x)
    torch._dynamo.reset()
    dirs["dump"] = str(tmp_path / "dump")
    for how, d in dirs.items():
        m = json.load(open(os.path.join(d, "manifest.json")))
        assert set(m["host_ops"]) == {"parity_test::cache_write", "parity_test::scale_"}, (how, m)
        g = json.load(open(os.path.join(d, m["graphs"][0]["file"])))
        targets = [n.get("target") for n in g["nodes"]]
        assert not any(t.startswith("hop::") for t in targets if t), targets
        assert targets.count("aten::clone") >= 2 and "aten::slice.Tensor" in targets, targets
        if how == "dump":
            assert {"mutated/buffer/cache", "mutated/buffer/state"} <= set(m["graphs"][0]["output_names"]), m
        r = parity(parity_bin, "repro", "run", d, "--import", "mutating_op_model")
        assert r.returncode == 0 and "PASS" in r.stdout, (how, r.stdout + r.stderr)
    # Both dirs with every backend, in one run (one worker imports the module once).
    backends = ("eager", "aot_eager", "inductor")
    out = tmp_path / "verify"
    r = parity(parity_bin, "verify", dirs["capture"], dirs["dump"], *[a for b in backends for a in ("--backend", b)],
               "--import", "mutating_op_model", "--output-dir", str(out))
    recs = [json.loads(line) for line in open(out / "results.jsonl")]
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted((rec["repro_input"], rec["experiment"]["backend"]) for rec in recs) == \
        sorted((os.path.abspath(d), b) for d in dirs.values() for b in backends), recs
    assert all(rec["verification_code"] == "PASS" for rec in recs), [(rec["repro_input"], rec["verification_code"]) for rec in recs]
