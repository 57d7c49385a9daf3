"""parity verify end to end over backends: suite models eval and train with eager and inductor at
-j 1 and -j 2 (the same verdicts, every record's phases), and every backend `parity backends`
lists as available on a suite model and a captured dir. (Split from test_verify.py so that
neither file's ctest entry holds most of the suite's longest tests.)"""
import os

from conftest import run_parity, verify, verify_cached


def test_eval_and_train_with_eager_and_inductor_one_slot_or_two(parity_bin, cache_dir, tmp_path):
    """A suite model, eval and train, a C++ backend and a compiler: every record PASS with the train
    step's loss, gradients and optimizer state compared; every record splits its wall time by phase
    (metrics.phase_seconds, results/phases.h), the parts adding up to the whole within 5%, and the
    terminal says the split; two slots (-j 2) give the verdicts one gives. (aot_eager, eval and
    train: test_every_available_backend_... below and test_host_ops.py. A conv net with BatchNorm
    through Inductor: test_minify_workflows.py's resnet, test_dynamo_backend.py's ConvBN trained;
    resnet trained here cost the suite 53 s of Inductor compiles, its most expensive test.)"""
    args = ["--model", "mlp", "--test", "eval", "--test", "train", "--backend", "eager", "--backend", "inductor"]
    codes = {}
    for jobs in (1, 2):
        r, lines = verify_cached(parity_bin, cache_dir, tmp_path / f"j{jobs}", *args, "-j", str(jobs))
        assert r.returncode == 0, r.stdout + r.stderr
        codes[jobs] = {(x["model"]["model_name"], x["experiment"]["backend"], x["experiment"]["test"]): x["verification_code"]
                       for x in lines}
        assert len(codes[jobs]) == 4 and set(codes[jobs].values()) == {"PASS"}, codes[jobs]
        assert "4 passed, 0 failed" in r.stdout
        for rec in lines:
            m = rec["metrics"]
            split = m["phase_seconds"]
            assert {"load", "compare", "process"} <= set(split), split
            # The reference runs in the record's own time, or ran ahead in an earlier one's wait
            # for its worker (that record's "ahead": runtime/jobs.h).
            assert {"eager", "fp64"} <= set(split) or any("ahead" in l["metrics"]["phase_seconds"] for l in lines), lines
            assert abs(sum(split.values()) - m["wall_time_s"]) <= 0.05 * m["wall_time_s"], m
        assert "time: " in r.stdout and "%" in r.stdout.split("time: ")[1], r.stdout
        train = next(l for l in lines if l["experiment"]["test"] == "train" and l["experiment"]["backend"] == "inductor")
        names = [o["path"] for o in train["outputs"]]
        assert names[0] == "loss" and any(n.startswith("grad/param/") for n in names) and any(n.startswith("sgd/") for n in names)
        assert any(n.startswith("grad/input/") for n in names)
    assert codes[1] == codes[2], codes


def test_every_available_backend_verifies_a_suite_model_and_a_captured_dir(parity_bin, cache_dir, tmp_path, test_data):
    """Each row of `parity backends` that is available here runs end to end: a suite model and a
    captured dir through `parity verify`, in one run, every record PASS (aot_inductor once failed
    with a NameError no test ran). The fault backend injects faults (test_every_code_for_real); a
    dynamo backend by name stands for torch_compile:<name>."""
    listing = run_parity(parity_bin, "backends")
    assert listing.returncode == 0, listing.stderr
    rows = [line.split(None, 2)[:2] for line in listing.stdout.splitlines() if line.strip()]
    available = [name for name, state in rows if state == "available" and name != "fault"
                 and not name.startswith("torch_compile:")]
    assert {"eager", "aot_eager", "inductor", "aot_inductor", "torchscript"} <= set(available), rows
    if "nativert" not in available:  # this torch's libraries do not export its handle: said why
        assert any(n == "nativert" and s == "unavailable" for n, s in rows), rows
    available.append("torch_compile:eager")
    # AOTInductor's precompiled header (12 CPU-s to build) pays back over many packages, not one.
    args = [os.path.join(test_data, "models", "mlp"), "--model", "mlp", "--backend-option", "aot_inductor.precompile_headers=False"]
    for b in available:
        args += ["--backend", b]
    r, lines = verify_cached(parity_bin, cache_dir, tmp_path, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {(x["experiment"]["backend"], x["model"]["suite_name"]): x["verification_code"] for x in lines}
    assert len(got) == 2 * len(available), got
    assert set(got.values()) == {"PASS"}, got


def test_a_wait_for_a_starting_worker_is_worker_start_where_the_backend_runs_here(parity_bin, tmp_path, test_data):
    """aot_eager's eval runs in the experiment's process and asks the worker for AOTAutograd's
    graph: with a fresh private worker (seconds to start, against the mlp reference's
    milliseconds) the record's wait for it is worker_start, not compile (it was all compile)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PARITY_WORKER_POOL", "PARITY_KEEP_WORKERS")}
    r, lines = verify(parity_bin, tmp_path, os.path.join(test_data, "models", "mlp"), "--backend", "aot_eager", env=env)
    assert r.returncode == 0 and len(lines) == 1, r.stdout + r.stderr
    split = lines[0]["metrics"]["phase_seconds"]
    assert split.get("worker_start", 0) > split.get("compile", 0), split
