"""parity ci and parity merge end to end, on real experiments (the fault backend over captured
repro dirs): every verdict produced for real against small expected files, --update-expected
round-trips, a sharded run (shards found from each CI engine's environment) merged gates like
the unsharded run, --jobs runs experiments at once, bad input is exit 2."""
import json
import os

import pytest

from conftest import run_parity

CONFIG = "cpu_fault_repro_inference"


def env_without_shards(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JOB_COMPLETION_INDEX", "PARITY_SHARDS", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
                        "SLURM_ARRAY_TASK_MIN", "CI_NODE_INDEX", "CI_NODE_TOTAL")}
    env.update(extra)
    return env


def parity(parity_bin, *args, **env):
    return run_parity(parity_bin, *args, env=env_without_shards(**env))


def fault(*opts):
    args = ["--backend", "fault"]
    for o in opts:
        args += ["--backend-option", o]
    return args


def ci(parity_bin, expected, out, *args, **env):
    r = parity(parity_bin, "ci", "--expected", expected, "--output-dir", out, *args, **env)
    gate = {}
    if os.path.exists(os.path.join(out, "gate.json")):
        gate = {row["name"]: row for row in json.load(open(os.path.join(out, "gate.json")))["rows"]}
    return r, gate


def write_expected(path, rows):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, CONFIG + ".csv"), "w") as f:
        f.write("name,accuracy,graph_breaks\n" + "".join(f"{n},{s},0\n" for n, s in rows))


@pytest.fixture
def baseline(parity_bin, dirs, tmp_path):
    """A baseline from a real run where everything passes (with error statistics)."""
    exp = tmp_path / "expected"
    r, _ = ci(parity_bin, exp, tmp_path / "base", dirs["mlp"], dirs["llama"], dirs["bert"],
              *fault("op=aten::gelu", "delta=1e-9"), "--update-expected")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (exp / (CONFIG + ".csv")).read_text() == "name,accuracy,graph_breaks\nbert,pass,0\nllama,pass,0\nmlp,pass,0\n"
    assert (exp / "expected_stats.jsonl").exists()
    return exp


def test_fail_xfail_improved_missing_new(parity_bin, dirs, baseline, tmp_path):
    write_expected(baseline, [("bert", "fail_accuracy"), ("llama", "eager_1st_run_fail"), ("mlp", "pass"),
                              ("oldmodel", "pass")])
    r, gate = ci(parity_bin, baseline, tmp_path / "out", dirs["mlp"], dirs["llama"], dirs["bert"], dirs["resnet"],
                 *fault("op=aten::gelu", "delta=1"), "--retries", "1")
    assert r.returncode == 1, r.stdout + r.stderr
    # Chosen repro dirs: a baseline row not chosen is not MISSING.
    assert {n: row["verdict"] for n, row in gate.items()} == {
        "mlp": "FAIL", "bert": "XFAIL", "llama": "IMPROVED", "resnet": "NEW"}
    assert gate["mlp"]["runs"] == 2  # the failure was rerun once
    assert os.path.isdir(gate["mlp"]["repro_dir"])
    assert "--update-expected" in r.stdout and "regressed" in r.stdout
    # Gating results: the whole configuration is there, so a row without a result is MISSING.
    r, gate = ci(parity_bin, baseline, tmp_path / "gate", "--results", tmp_path / "out" / "results.jsonl")
    assert r.returncode == 1 and gate["oldmodel"]["verdict"] == "MISSING" and gate["mlp"]["verdict"] == "FAIL", r.stdout


def test_flaky_by_rerun_and_by_list(parity_bin, dirs, baseline, tmp_path):
    once = tmp_path / "once"
    r, gate = ci(parity_bin, baseline, tmp_path / "out", dirs["mlp"], *fault("op=aten::gelu", "delta=1", f"once={once}"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert gate["mlp"]["verdict"] == "FLAKY" and gate["mlp"]["note"] == "passed 1 of 2 runs", gate
    r, _ = ci(parity_bin, baseline, tmp_path / "strict", dirs["mlp"], *fault("op=aten::gelu", "delta=1", f"once={once}2"),
              "--strict")
    assert r.returncode == 1, r.stdout
    (baseline / "flaky_models.txt").write_text("mlp\n")
    r, gate = ci(parity_bin, baseline, tmp_path / "listed", dirs["mlp"], *fault("op=aten::gelu", "delta=1"))
    assert r.returncode == 0 and gate["mlp"]["verdict"] == "FLAKY" and gate["mlp"]["runs"] == 1, r.stdout


def test_drift_passes_unless_fail_on_drift(parity_bin, dirs, baseline, tmp_path):
    args = [dirs["mlp"], dirs["llama"], *fault("op=aten::silu", "delta=1e-6")]  # llama has silu, mlp does not
    r, gate = ci(parity_bin, baseline, tmp_path / "out", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert gate["mlp"]["verdict"] == "PASS" and gate["llama"]["verdict"] == "DRIFT", gate
    assert gate["llama"]["note"].startswith("logits: ") and "limit 10x" in gate["llama"]["note"]
    r, _ = ci(parity_bin, baseline, tmp_path / "out", *args, "--fail-on-drift")
    assert r.returncode == 1
    r, gate = ci(parity_bin, baseline, tmp_path / "out", *args, "--drift-factor", "1e6")
    assert gate["llama"]["verdict"] == "PASS"


def test_update_expected_round_trips(parity_bin, dirs, baseline, tmp_path):
    out = tmp_path / "out"
    r, _ = ci(parity_bin, baseline, out, dirs["mlp"], dirs["llama"], dirs["bert"], *fault("op=aten::gelu", "delta=1"),
              "--retries", "0")
    assert r.returncode == 1
    update = r.stdout.split("update the baseline and commit it:\n")[1].split("\n")[0].split()
    assert update[:2] == ["parity", "ci"]
    u = parity(parity_bin, *update[1:])
    assert u.returncode == 0, u.stdout + u.stderr
    csv = (baseline / (CONFIG + ".csv")).read_text()
    assert csv == "name,accuracy,graph_breaks\nbert,fail_accuracy,0\nllama,pass,0\nmlp,fail_accuracy,0\n"
    again = parity(parity_bin, *update[1:])
    assert "baseline unchanged" in again.stdout and (baseline / (CONFIG + ".csv")).read_text() == csv
    r, gate = ci(parity_bin, baseline, tmp_path / "gate", "--results", out / "results.jsonl")
    assert r.returncode == 0 and {g["verdict"] for g in gate.values()} == {"PASS", "XFAIL"}, r.stdout


def test_sharded_then_merged_gates_like_unsharded(parity_bin, dirs, baseline, tmp_path):
    write_expected(baseline, [("bert", "pass"), ("llama", "pass"), ("mlp", "pass"), ("resnet", "pass")])
    args = [dirs["mlp"], dirs["llama"], dirs["bert"], dirs["resnet"], *fault("op=aten::gelu", "delta=1"), "--retries", "0"]
    r, whole = ci(parity_bin, baseline, tmp_path / "whole", *args)
    assert r.returncode == 1
    # Three shards, each finding its place in a different engine's environment.
    engines = [dict(JOB_COMPLETION_INDEX="0", PARITY_SHARDS="3"),
               dict(SLURM_ARRAY_TASK_ID="2", SLURM_ARRAY_TASK_MIN="1", SLURM_ARRAY_TASK_COUNT="3"),
               dict(CI_NODE_INDEX="3", CI_NODE_TOTAL="3")]
    ran = []
    for i, env in enumerate(engines):
        r, part = ci(parity_bin, baseline, tmp_path / f"shard{i}", *args, **env)
        assert f"shard {i + 1}/3" in r.stdout, r.stdout + r.stderr
        assert "MISSING" not in {g["verdict"] for g in part.values()}  # a shard gates only its own part
        ran += list(part)
    assert sorted(ran) == sorted(whole)  # every experiment ran exactly once
    m = parity(parity_bin, "merge", tmp_path / "merged", *[tmp_path / f"shard{i}" for i in range(3)])
    assert m.returncode == 0, m.stdout + m.stderr
    r, merged = ci(parity_bin, baseline, tmp_path / "gate", "--results", tmp_path / "merged" / "results.jsonl")
    assert r.returncode == 1
    strip = lambda g: {n: (row["verdict"], row["status"], row["expected"]) for n, row in g.items()}
    assert strip(merged) == strip(whole)
    assert all(os.path.isdir(row["repro_dir"]) for row in merged.values() if row["verdict"] == "FAIL")


def test_jobs_run_experiments_at_once(parity_bin, dirs, tmp_path):
    # Each experiment waits until two are in the rendezvous dir: it passes only when two run at once.
    opts = fault("op=aten::gelu", "delta=1e-9", f"rendezvous={tmp_path / 'rv'}", "parties=2")
    r = parity(parity_bin, "verify", dirs["mlp"], dirs["llama"], dirs["bert"], dirs["resnet"], *opts, "--jobs", "2",
               "--output-dir", tmp_path / "out")
    lines = [json.loads(l) for l in open(tmp_path / "out" / "results.jsonl")]
    assert r.returncode == 0 and [l["verification_code"] for l in lines] == ["PASS"] * 4, r.stdout + r.stderr


PYTORCH_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pytorch", "inductor_huggingface_training.csv")


def test_pytorchs_own_expected_file_gates_captured_training_dirs(parity_bin, tmp_path):
    """PyTorch's ci_expected_accuracy/inductor_huggingface_training.csv as it is (infra_error
    among its statuses), with blank lines between rows and a status parity does not know added:
    programs trained under amp bf16 and captured with dump_backend(..., suite="huggingface") under
    the names of its rows are gated against it, no renaming; the unknown status is a warning
    naming file and line, compared as text."""
    import torch
    from parity_capture import dump_backend
    dirs = []
    for name in ("BertForMaskedLM", "DistilBertForMaskedLM"):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
        torch._dynamo.reset()
        step = torch.compile(net, backend=dump_backend(str(tmp_path / name), name, suite="huggingface"))
        with torch.autocast("cpu", torch.bfloat16):
            loss = step(torch.randn(4, 8)).float().square().mean()
        loss.backward()
        torch._dynamo.reset()
        m = json.load(open(tmp_path / name / "manifest.json"))
        assert m["suite"] == "huggingface" and m["model"] == name and m["mode"] == "train", m
        dirs.append(tmp_path / name)
    expected = tmp_path / "inductor_huggingface_training.csv"
    text = open(PYTORCH_FILE).read().replace("\nBertForQuestionAnswering", "\n\nBertForQuestionAnswering")
    expected.write_text(text + "NewModel,brand_new_status,0\n")
    # The gate is what is tested, not a compiler: parity's eager replay (no worker, no kernel builds).
    r, gate = ci(parity_bin, expected, tmp_path / "out", *dirs, "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    assert gate["BertForMaskedLM"]["verdict"] == "PASS" and gate["DistilBertForMaskedLM"]["verdict"] == "PASS", gate
    assert "infra_error" not in r.stdout, r.stdout  # a status of PyTorch's files: no warning
    line = text.count("\n") + 1
    assert f"warning: {expected}:{line}: accuracy \"brand_new_status\" is not a status parity knows" in r.stdout, r.stdout


def test_bad_input_is_exit_2(parity_bin, dirs, baseline, tmp_path):
    (baseline / (CONFIG + ".csv")).write_text("name,accuracy\nmlp,\n")
    r, _ = ci(parity_bin, baseline, tmp_path / "out", dirs["mlp"], *fault("op=aten::gelu"))
    assert r.returncode == 2 and CONFIG + ".csv:2" in r.stderr and "accuracy" in r.stderr, r.stderr
    (tmp_path / "bad.jsonl").write_text("{}\n")
    r, _ = ci(parity_bin, baseline, tmp_path / "out", "--results", tmp_path / "bad.jsonl")
    assert r.returncode == 2 and "bad.jsonl:1" in r.stderr, r.stderr
    r, _ = ci(parity_bin, tmp_path / "nothing", tmp_path / "out", dirs["mlp"], *fault("op=aten::gelu"))
    assert r.returncode == 2 and "--update-expected" in r.stderr
    r = parity(parity_bin, "verify", dirs["mlp"], "--shard", "0/2")
    assert r.returncode == 2 and "--shard" in r.stderr
    r = parity(parity_bin, "verify", dirs["mlp"], CI_NODE_INDEX="x", CI_NODE_TOTAL="2")
    assert r.returncode == 2 and "CI_NODE_INDEX" in r.stderr
