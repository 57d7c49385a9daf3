"""Workers kept warm across runs (--keep-workers, runtime/worker_pool.h), end to end: a verify
leaves its worker idle in the pool, the minify that follows adopts it and finds the same culprit,
hands it back, and `parity workers --stop` ends it; a kept worker ends itself after its idle
seconds; a worker a job poisoned is never handed back; a pool others may enter and a malformed
$PARITY_KEEP_WORKERS are bad input. Every test has a pool dir of its own and stops what it kept."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import run_parity, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from custom_op_model import capture_custom  # noqa: E402
from relu_model import RELU_KNOB, capture_relu  # noqa: E402


@pytest.fixture
def pool(tmp_path, monkeypatch):
    """A pool dir of this test's (mode 0700, as parity makes it); its workers ended afterwards."""
    d = tmp_path / "pool"
    monkeypatch.setenv("PARITY_WORKER_POOL", str(d))
    monkeypatch.delenv("PARITY_KEEP_WORKERS", raising=False)  # each test says what it keeps
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "cache"))
    yield d
    if d.exists():
        os.chmod(d, 0o700)  # as a test may have left it
    for w in workers(os.environ["PARITY_BIN"]) if os.environ.get("PARITY_BIN") else []:
        if w["live"]:
            os.kill(w["pid"], signal.SIGKILL)


def with_host_op(parity_bin, *args):
    """`parity *args --import custom_op_model`, the module importable: a run of the `custom` dir."""
    return run_parity(parity_bin, *args, "--import", "custom_op_model", env=dict(os.environ, PYTHONPATH=HERE))


def workers(parity_bin):
    r = run_parity(parity_bin, "workers", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_minify_adopts_the_worker_its_verify_kept(parity_bin, pool, tmp_path):
    src = capture_relu(str(tmp_path / "relunet"), 2)
    r = run_parity(parity_bin, "verify", src, *RELU_KNOB, "--output-dir", str(tmp_path / "v"), "--keep-workers", "120")
    assert r.returncode == 1, r.stdout + r.stderr  # the knob's wrong relu fails
    kept = workers(parity_bin)
    assert [(w["live"], w["in_use"], w["keep_idle_s"]) for w in kept] == [(True, False, 120)], kept
    assert oct(os.stat(pool).st_mode & 0o777) == "0o700"
    repro = os.path.join(tmp_path, "v", "repros", os.listdir(tmp_path / "v" / "repros")[0])
    # (No compiler bisection: a worker that ran one is not handed back, test_worker.py.)
    r = run_parity(parity_bin, "minify", repro, "--out", str(tmp_path / "m"), "--no-compiler-bisect", "--no-stage-bisect")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert s["workers_adopted"] == 1, s
    assert s["culprit"]["target"] == "aten::relu" and s["ops_after"] == 1, s["graph_text"]
    # Handed back: the same worker, idle again.
    after = workers(parity_bin)
    assert [(w["pid"], w["live"], w["in_use"]) for w in after] == [(kept[0]["pid"], True, False)], after
    # A run in another environment (another Inductor setting) does not adopt it: it starts and keeps
    # a worker of its own beside it. (Not another Inductor cache: its worker's start would build
    # Inductor's ISA probes again, 8 s of this test's 30.)
    other = dict(os.environ, TORCHINDUCTOR_MAX_AUTOTUNE="1")
    r = subprocess.run([parity_bin, "verify", src, "--backend", "aot_eager", "--output-dir", str(tmp_path / "v2"),
                        "--keep-workers", "120"], capture_output=True, text=True, env=other)
    assert r.returncode == 0, r.stdout + r.stderr
    both = workers(parity_bin)
    assert sorted((w["pid"] == kept[0]["pid"], w["live"], w["in_use"]) for w in both) == \
        [(False, True, False), (True, True, False)], both
    r = run_parity(parity_bin, "workers", "--stop")
    assert r.returncode == 0 and "stopped 2 idle workers" in r.stdout, r.stdout
    assert wait_until(lambda: not any(w["live"] for w in workers(parity_bin)), 10)


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """A program with a host op (custom_op_model's scaled_gelu): its experiment's child runs the op
    in the slot's worker, so the worker has served the run whatever the machine's load (a worker a
    run never used may be dropped before its fork is answered: docs/worker.md)."""
    return capture_custom(str(tmp_path_factory.mktemp("cop") / "cop"))


def test_a_kept_worker_ends_after_its_idle_seconds(parity_bin, pool, tmp_path, custom):
    # A C++ backend and a host op: the experiment's child runs the op in the slot's worker.
    r = with_host_op(parity_bin, "verify", custom, "--backend", "fault", "--backend-option", "op=aten::tanh",
                     "--backend-option", "kind=perturb", "--output-dir", str(tmp_path / "v"), "--keep-workers", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    # Two: the one that checked --import's modules at the start (the process's own) and the slot's.
    kept = workers(parity_bin)
    assert [w["live"] for w in kept] == [True, True], kept
    # Idle seconds count once a worker has listened, after its imports, which on a busy 2-core
    # machine (a CI run with three entries at once) took more than 13 s. Hence a generous bound:
    # what fails here is a worker that never ends.
    assert wait_until(lambda: not any(w["live"] for w in workers(parity_bin)), 60), workers(parity_bin)


@pytest.mark.parametrize("kind,poisons", [("oom", True), ("perturb", False)])
def test_a_poisoned_worker_is_never_handed_back(parity_bin, pool, tmp_path, custom, kind, poisons):
    # kind=oom: the result says the process is out of memory; the slot's worker goes with it (what
    # is left is a fresh one, started for what verify asked after: launches 2, or none).
    r = with_host_op(parity_bin, "verify", custom, "--backend", "fault", "--backend-option", "op=aten::tanh",
                     "--backend-option", f"kind={kind}", "--output-dir", str(tmp_path / "v"), "--keep-workers", "120")
    assert r.returncode == 1, r.stdout + r.stderr
    # Entry 0 holds the worker that checked --import's modules at the start (never given a job),
    # entry 1 the slot's.
    kept = sorted(workers(parity_bin), key=lambda w: w["index"])
    assert len(kept) == 2 and kept[0]["live"] and kept[0]["launches"] == 1, kept
    if poisons:
        assert not kept[1]["live"] or kept[1]["launches"] >= 2, kept
    else:
        assert kept[1]["live"] and kept[1]["launches"] == 1, kept


def test_a_pool_others_may_enter_is_bad_input(parity_bin, pool, tmp_path, test_data):
    os.makedirs(pool, mode=0o755)
    os.chmod(pool, 0o755)
    r = run_parity(parity_bin, "verify", os.path.join(test_data, "models", "mlp"), "--backend", "eager", "--output-dir",
                   str(tmp_path / "v"), "--keep-workers", "5")
    assert r.returncode == 2 and str(pool) in r.stderr and "0700" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "v" / "results.jsonl")


def test_a_malformed_keep_workers_variable_is_bad_input(parity_bin, pool, tmp_path, test_data, monkeypatch):
    monkeypatch.setenv("PARITY_KEEP_WORKERS", "ten")
    r = run_parity(parity_bin, "verify", os.path.join(test_data, "models", "mlp"), "--backend", "eager", "--output-dir",
                   str(tmp_path / "v"))
    assert r.returncode == 2 and "PARITY_KEEP_WORKERS=ten" in r.stderr, r.stderr


def test_ci_minify_adopts_the_workers_its_verify_warmed(parity_bin, pool, tmp_path, custom):
    # A gate that regresses (the program was a pass; the fault backend perturbs its tanh), minified
    # in the same run: the minification adopts the worker the gate's verify used (its host op ran
    # there) and names the culprit.
    exp = tmp_path / "expected"
    exp.mkdir()
    (exp / "cpu_fault_repro_inference.csv").write_text("name,accuracy,graph_breaks\ncustom_op_net,pass,0\n")
    r = with_host_op(parity_bin, "ci", "--expected", str(exp), "--output-dir", str(tmp_path / "out"), custom,
                     "--backend", "fault", "--backend-option", "op=aten::tanh", "--backend-option", "kind=perturb",
                     "--minify", "--keep-workers", "60")
    assert r.returncode == 1 and "culprit: aten::tanh" in r.stdout, r.stdout + r.stderr
    row = json.load(open(tmp_path / "out" / "gate.json"))["rows"][0]
    summary = json.load(open(os.path.join(os.path.dirname(row["minified_dir"]), "summary.json")))
    assert summary["workers_adopted"] == 1 and summary["culprit"]["target"] == "aten::tanh", summary
    assert [w["live"] for w in workers(parity_bin)] == [True, True]  # the slot's, and the --import check's


def test_a_runs_workers_warm_up_for_a_dynamo_backend_before_they_listen(parity_bin, pool, tmp_path, test_data, monkeypatch):
    # Both slots' workers (kept here, so their logs stay in the pool) warm up for the backend's
    # compile on the CPU before they listen (worker.py --warm): dynamo and Inductor imported, the
    # vector ISA chosen. The second is forked by the key's fork server (runtime/fork_server.h),
    # and warms up after its fork.
    monkeypatch.delenv("PARITY_FORK_SERVER", raising=False)  # forking on, whatever the caller set
    models = [os.path.join(test_data, "models", m) for m in ("mlp", "resnet")]
    r = run_parity(parity_bin, "verify", *models, "--backend", "torch_compile:eager", "-j", "2",
                   "--output-dir", str(tmp_path / "v"), "--keep-workers", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    logs = sorted(p for p in pool.glob("*.log") if not p.name.endswith("-fs.log"))  # the entries' workers
    warmed = lambda: all("warmed up for cpu" in p.read_text() for p in logs)  # noqa: E731
    assert len(logs) == 2 and wait_until(warmed, 60), [p.read_text()[-500:] for p in logs]
    assert len(list(pool.glob("*-fs.sock"))) == 1
