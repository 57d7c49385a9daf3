"""parity verify end to end: every verification code produced for real (fault injection),
results.jsonl, resume after a kill, the repro dir written on failure, bad input. (Suite models
with every backend, eval and train, at -j 1 and -j 2: test_verify_backends.py.)"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import run_parity, verify_cached as verify


FAULTS = [
    # (backend args, expected code, text the error must contain)
    (["--backend", "eager"], "PASS", None),
    (["--backend", "fault", "--backend-option", "op=aten::gelu"], "FAIL", "RMSE"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=nan"], "FAIL", "nan"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=raise"], "EXCEPTION_RAISED", "fault injected"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=oom"], "EXCEPTION_RAISED", "allocate"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=raise",
      "--backend-option", "in=eager"], "EAGER_FAILED", "eager 1st run"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=noise",
      "--backend-option", "in=eager"], "NONDETERMINISTIC_EAGER_RUN", "eager runs differ"),
    (["--backend", "aot_inductor", "--test", "train"], "VERIFIER_SKIPPED", "inference only"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=segfault"], "VERIFIER_DIDNT_RUN", "SIGSEGV"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=abort"], "VERIFIER_DIDNT_RUN", "SIGABRT"),
    (["--backend", "fault", "--backend-option", "op=aten::gelu", "--backend-option", "kind=hang",
      "--timeout", "3"], "VERIFIER_DIDNT_RUN", "timed out"),
]


@pytest.mark.parametrize("args,code,text", FAULTS, ids=[f"{c}-{i}" for i, (_, c, _) in enumerate(FAULTS)])
def test_every_code_for_real(parity_bin, cache_dir, tmp_path, args, code, text):
    r, lines = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", *args)
    assert len(lines) == 1, r.stdout + r.stderr
    line = lines[0]
    assert line["verification_code"] == code, line
    if text:
        assert text in line.get("error", "") or text in json.dumps(line["outputs"]), line
    assert r.returncode == (0 if code in ("PASS", "VERIFIER_SKIPPED") else 1)


def test_a_device_this_torch_or_machine_lacks_is_bad_input(parity_bin, cache_dir, tmp_path):
    """--device is checked against this torch build and machine, for every device type torch
    knows alike: one it lacks is exit 2 naming --device, before anything runs."""
    lacking = [d for d in ("xpu", "mps", "hpu", "cuda") if not parity_has(parity_bin, d)]
    assert lacking, "this build has every device type"
    for device in lacking + ["banana"]:
        r, lines = verify(parity_bin, cache_dir, tmp_path / device, "--model", "mlp", "--device", device)
        assert r.returncode == 2 and "--device " + device in r.stderr and not lines, (device, r.stdout, r.stderr)
    r = run_parity(parity_bin, "repro", "run", os.environ["PARITY_TEST_DATA"] + "/models/mlp", "--device", lacking[0])
    assert r.returncode == 2 and "--device " + lacking[0] in r.stderr, r.stderr


def parity_has(parity_bin, device):
    """Whether parity's own torch build and this machine run `device` (repro run refuses one they lack)."""
    r = run_parity(parity_bin, "repro", "run", os.environ["PARITY_TEST_DATA"] + "/models/mlp", "--device", device)
    return r.returncode != 2


def test_results_jsonl_fields(parity_bin, cache_dir, tmp_path):
    r, lines = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend", "eager", "--repeat", "2",
                      "--iterations-per-run", "3")
    line = lines[0]
    assert line["model"] == {"suite_name": "toy", "model_name": "mlp"}
    exp = line["experiment"]
    assert exp["accelerator"] == "cpu" and exp["backend"] == "eager" and exp["test"] == "eval"
    assert exp["batch_size"] == 8 and exp["dtype"] == "float32" and exp["accelerator_model"]
    assert line["repeat"] == 2 and line["iterations_per_run"] == 3
    assert len(line["metrics"]["total_time"]) == 2 and len(line["metrics"]["per_iter_time"]) == 2
    assert "compile_time_s" in line["metrics"] and line["timestamp"] > 0
    stats = line["outputs"][0]["stats"]
    assert {"max_abs_err", "rmse_res_vs_fp64", "mismatches", "cosine"} <= set(stats)


def test_failure_leaves_a_repro_dir(parity_bin, cache_dir, tmp_path):
    r, lines = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend", "fault", "--backend-option", "op=aten::gelu")
    repro = lines[0]["repro_dir"]
    manifest = json.load(open(os.path.join(repro, "manifest.json")))
    assert manifest["backend"] == {"name": "fault", "options": {"op": "aten::gelu"}}
    assert manifest["failure"]["verification_code"] == "FAIL" and manifest["failure"]["kind"] == "accuracy"
    show = run_parity(parity_bin, "repro", "show", repro)
    assert show.returncode == 0 and "# backend fault" in show.stdout
    again, lines2 = verify(parity_bin, cache_dir, tmp_path / "again", repro, "--backend", "eager")
    assert lines2[0]["verification_code"] == "PASS", again.stdout


def test_resume_after_kill(parity_bin, cache_dir, tmp_path):
    # mlp has no relu: it passes; resnet hangs in the fault backend until the run is killed.
    args = [parity_bin, "verify", "--cache-dir", cache_dir, "--output-dir", str(tmp_path), "--model", "mlp", "--model", "resnet",
            "--backend", "fault", "--backend-option", "op=aten::relu", "--backend-option", "kind=hang"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    results = tmp_path / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (results.exists() and results.read_text().count("\n") >= 1):
        time.sleep(0.2)
    time.sleep(1.0)  # resnet is now hanging in its child
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert results.read_text().count("\n") == 1
    r = subprocess.run(args + ["--timeout", "3"], capture_output=True, text=True)
    lines = [json.loads(l) for l in open(results)]
    assert [l["model"]["model_name"] for l in lines] == ["mlp", "resnet"]  # no duplicate of mlp
    assert lines[1]["verification_code"] == "VERIFIER_DIDNT_RUN"
    assert "1 already in" in r.stdout


def test_bad_input_is_exit_2(parity_bin, cache_dir, test_data, tmp_path):
    r, _ = verify(parity_bin, cache_dir, tmp_path, "--model", "nosuchmodel")
    assert r.returncode == 2 and "--model \"nosuchmodel\"" in r.stderr
    r, _ = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend", "tensorrt")
    assert r.returncode == 2 and "unknown backend" in r.stderr
    r, _ = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend-option", "nonsense")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    r, _ = verify(parity_bin, cache_dir, tmp_path, str(tmp_path / "missing_dir"))
    assert r.returncode == 2 and "missing_dir" in r.stderr
    r, _ = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--import", "no_such_plugin")
    assert r.returncode == 2 and "--import no_such_plugin: cannot import it" in r.stderr, r.stderr
    r, _ = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend-option", "faults:op=aten::gelu")
    assert r.returncode == 2 and '"faults:op=aten::gelu": unknown backend "faults"' in r.stderr, r.stderr
    # An op this torch lacks (a dir from a newer torch, a typo): named before anything runs, not EAGER_FAILED.
    mlp = tmp_path / "mlp_unknown_op"
    shutil.copytree(os.path.join(test_data, "models", "mlp"), mlp)
    graph = mlp / "graphs" / "graph_0.json"
    graph.write_text(graph.read_text().replace('"aten::gelu"', '"aten::gelu_from_the_future"'))
    r, _ = verify(parity_bin, cache_dir, tmp_path, str(mlp))
    assert r.returncode == 2 and 'graph_0.json: node "gelu": unknown op "aten::gelu_from_the_future"' in r.stderr, r.stderr


# A dynamo backend that appends its process's share of the cores to the file OUT names (in the
# module, not the environment: a variable of the test's own would be another worker's key).
ENV_PROBE = """
import os
from torch._dynamo import register_backend

@register_backend
def env_probe(gm, example_inputs):
    with open(OUT, "a") as f:
        f.write(os.environ.get("PARITY_SLOT_CPUS", "none") + "\\n")
    return gm.forward
"""


def test_a_bad_dir_naming_another_device_does_not_set_the_runs(parity_bin, cache_dir, test_data, tmp_path):
    """The slots' processes and workers start before the dirs are read, for the device the
    manifests name. A dir naming CUDA that its read then finds bad leaves the run a CPU run: the
    early start is dropped and the slots start afresh, so the worker that runs the CPU dir's
    backend has a CPU slot's environment (a CUDA slot's names its share of the cores)."""
    good, bad = tmp_path / "mlp", tmp_path / "mlp_cuda_bad"
    shutil.copytree(os.path.join(test_data, "models", "mlp"), good)
    shutil.copytree(good, bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["device"] = "cuda"
    (bad / "manifest.json").write_text(json.dumps(m))
    os.remove(bad / "tensors.safetensors")
    probe = tmp_path / "probe.txt"
    (tmp_path / "env_probe.py").write_text(f"OUT = {str(probe)!r}\n" + ENV_PROBE)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([parity_bin, "verify", str(good), str(bad), "--backend", "torch_compile:env_probe", "--import", "env_probe",
                        "--cache-dir", cache_dir, "--output-dir", str(tmp_path / "out")], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and f"not verified: {bad}" in r.stdout, r.stdout + r.stderr
    records = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    assert [(x["verification_code"], x["experiment"]["accelerator"]) for x in records] == [("PASS", "cpu")], records
    assert probe.read_text().split() == ["none"]


def test_backend_options_scoped_to_a_backend_reach_that_backend_only(parity_bin, test_data, tmp_path):
    """--backend-option BACKEND:KEY=VALUE in a run of several backends: the fault backend's op and
    kind are its experiment's only, not eager's beside it; the records say each one's options."""
    from conftest import verify as verify_dirs
    mlp = os.path.join(test_data, "models", "mlp")
    r, records = verify_dirs(parity_bin, tmp_path, mlp, "--backend", "eager", "--backend", "fault",
                             "--backend-option", "fault:op=aten::gelu", "--backend-option", "fault:kind=nan")
    by = {x["experiment"]["backend"]: x for x in records}
    assert by["eager"]["verification_code"] == "PASS" and by["eager"]["experiment"]["backend_options"] == {}, by
    assert by["fault"]["verification_code"] == "FAIL", by["fault"]
    assert by["fault"]["experiment"]["backend_options"] == {"op": "aten::gelu", "kind": "nan"}, by["fault"]


def test_an_imported_plugin_reaches_the_backends_compile(parity_bin, cache_dir, tmp_path):
    """--import MODULE is imported where the backend compiles: a plugin that registers a wrong
    post-grad pass at import makes Inductor's result FAIL (before issue 31 it never got there)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    from relu_model import capture_relu
    src = capture_relu(str(tmp_path / "relunet"), blocks=2)
    r = subprocess.run([parity_bin, "verify", "--output-dir", str(tmp_path / "v"), src,
                        "--backend", "inductor", "--import", "wrong_post_grad_pass"], capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    (rec,) = [json.loads(line) for line in open(tmp_path / "v" / "results.jsonl")]
    assert rec["verification_code"] == "FAIL", rec


def test_models_and_backends_listings(parity_bin):
    r = run_parity(parity_bin, "models", "--json")
    names = {m["name"] for m in json.loads(r.stdout)}
    assert {"llama", "gpt2", "bert", "t5", "mistral", "qwen2", "resnet", "mobilenet", "dlrm", "mlp"} <= names
    r = run_parity(parity_bin, "backends", "--json")
    listing = json.loads(r.stdout)
    by = {b["name"]: b for b in listing["backends"]}
    # Both torch builds shown, and they are the same one.
    assert listing["torch"]["built_against"] == listing["torch"]["worker"], listing["torch"]
    assert {"eager", "aot_eager", "aot_eager_decomp_partition", "inductor", "aot_inductor", "nativert", "torchscript",
            "torch_compile:<name>", "fault"} <= set(by)
    assert by["eager"]["available"]


def test_amp_captures_autocast_into_the_graph(parity_bin, cache_dir, tmp_path):
    r, lines = verify(parity_bin, cache_dir, tmp_path, "--model", "mlp", "--backend", "eager", "--dtype", "amp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines[0]["experiment"]["dtype"] == "amp" and lines[0]["verification_code"] == "PASS"
    assert lines[0]["tolerance"] == 1e-3  # torchbench-style suites: reduced precision widens the tolerance
    captures = [d for d in os.listdir(os.path.join(cache_dir, "captures")) if d.startswith("mlp-eval-amp")]
    graph = open(os.path.join(cache_dir, "captures", captures[0], "graphs", "graph_0.json")).read()
    assert '"bfloat16"' in graph  # the casts autocast inserted are explicit ops of the graph


def test_backends_lists_entry_point_dynamo_backends(parity_bin, tmp_path):
    # A vendor backend registered the way out-of-tree ones are: a torch_dynamo_backends entry point.
    site = tmp_path / "site"
    (site / "vendor_be-0.1.dist-info").mkdir(parents=True)
    (site / "vendor_be-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-be\nVersion: 0.1\n")
    (site / "vendor_be-0.1.dist-info" / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\nvendor_be = vendor_be_mod:compile_fn\n")
    (site / "vendor_be_mod.py").write_text("def compile_fn(gm, example_inputs):\n    return gm.forward\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run([parity_bin, "backends", "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    by = {b["name"]: b for b in json.loads(r.stdout)["backends"]}
    assert by["torch_compile:vendor_be"]["available"]
    assert "torch_compile:inductor" in by


def test_a_worker_of_another_torch_build_is_exit_2_naming_both(parity_bin, tmp_path, test_data):
    """parity's interpreter (the references) and the worker (the backend) must run one torch build:
    a worker whose torch reports another (here a sitecustomize rewrites its version) answers with
    both builds and what to rebuild, and the command is exit 2."""
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '9.9.9+other'\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PARITY_WORKER_POOL="", PARITY_KEEP_WORKERS="0")
    r = subprocess.run([parity_bin, "backends"], capture_output=True, text=True, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "9.9.9+other" in r.stderr and "is not the build parity was built against" in r.stderr, r.stderr
    assert "rebuild parity against this Python's torch" in r.stderr, r.stderr
    # verify: the experiment's record says so, and the run is exit 2.
    r = subprocess.run([parity_bin, "verify", os.path.join(test_data, "models", "mlp"), "--backend", "inductor",
                        "--output-dir", str(tmp_path / "v")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "TorchMismatch" in r.stdout and "9.9.9+other" in r.stderr, r.stdout + r.stderr
    r = subprocess.run([parity_bin, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "built against torch" in r.stdout and "git " in r.stdout and "CUDA " in r.stdout, r.stdout


def test_a_slots_next_jobs_are_prepared_while_its_worker_starts_and_a_crash_there_is_theirs(parity_bin, test_data, tmp_path):
    """A job whose slot's worker is still starting is told of the slot's next jobs and runs their
    references while it waits (runtime/jobs.h): they run no reference at their turn, and the
    waiting one's record says the time as `ahead`. When a next job's eager run crashes the process
    there, the waiting job is run again alone and passes, and the crash is the next job's own
    record. Each run starts a fresh worker (no kept one: a worker that listens tells of nothing)."""

    def copy(model, name, backend=None):
        d = tmp_path / name
        shutil.copytree(os.path.join(test_data, "models", model), d)
        if backend:  # the dir's own backend and options: what an experiment of that backend takes
            m = json.load(open(d / "manifest.json"))
            m["backend"] = backend
            json.dump(m, open(d / "manifest.json", "w"))
        return d

    env = {k: v for k, v in os.environ.items() if k not in ("PARITY_KEEP_WORKERS", "PARITY_WORKER_POOL")}

    # The worker's Python through a wrapper that counts the workers started.
    starts, python = tmp_path / "starts", tmp_path / "python"
    python.write_text(f'#!/bin/sh\ncase "$*" in *worker*) echo >> {starts};; esac\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    env["PARITY_PYTHON"] = str(python)

    def run(out, *args):
        r = run_parity(parity_bin, "verify", *args, "-j", "1", "--output-dir", out, env=env)
        return r, [json.loads(line) for line in open(out / "results.jsonl")]

    r, recs = run(tmp_path / "told", copy("mlp", "first"), copy("mlp", "second"), "--backend", "inductor")
    assert r.returncode == 0 and [x["verification_code"] for x in recs] == ["PASS", "PASS"], r.stdout + r.stderr
    phases = {os.path.basename(x["repro_input"]): x["metrics"]["phase_seconds"] for x in recs}
    assert "ahead" in phases["first"] and not {"eager", "fp64"} & set(phases["second"]), phases

    # The fault backend's options are the dir's: its eager runs crash; Inductor's experiment of
    # the same dir, first, waits for its worker and prepares the fault one meanwhile.
    crashing = copy("mlp", "crashing", {"name": "fault", "options": {"op": "aten::gelu", "kind": "segfault", "in": "eager"}})
    r, recs = run(tmp_path / "crash", crashing, "--backend", "inductor", "--backend", "fault")
    codes = {x["experiment"]["backend"]: x for x in recs}
    assert codes["inductor"]["verification_code"] == "PASS", codes["inductor"]
    fault = codes["fault"]
    assert fault["verification_code"] == "VERIFIER_DIDNT_RUN" and "SIGSEGV" in fault["error"], fault
    assert "during eager" in fault["error"], fault["error"]
    # The crash ahead was not the worker's (nothing had asked it yet): one worker served both runs.
    assert starts.read_text().count("\n") == 2, "a worker started again after the crash ahead"
