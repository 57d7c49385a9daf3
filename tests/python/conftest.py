import os
import subprocess
import sys
import time

import pytest

import parity_fork

# The suite's parity runs keep their Python workers warm for the next run (--keep-workers, as a
# user's CI would), in a pool of the suite's own that ctest names ($PARITY_TEST_WORKER_POOL, in the
# build dir): each run adopts a warm worker instead of starting one (torch imported, Inductor's
# first compile paid). Without it (pytest by hand) no run keeps any; a developer's own
# $PARITY_KEEP_WORKERS never reaches the suite. test_worker_pool.py uses pools of its own.
if os.environ.get("PARITY_TEST_WORKER_POOL"):
    os.environ["PARITY_WORKER_POOL"] = os.environ["PARITY_TEST_WORKER_POOL"]
    os.environ["PARITY_KEEP_WORKERS"] = os.environ.get("PARITY_TEST_KEEP_WORKERS", "30")
else:
    os.environ.pop("PARITY_KEEP_WORKERS", None)


@pytest.fixture(scope="session")
def parity_bin():
    path = os.environ.get("PARITY_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("PARITY_BIN is not set (run through ctest)")
    return path


@pytest.fixture
def dirs(test_data):
    """The fixture's captured suite models by name (test_ci.py, test_reports.py)."""
    return {m: os.path.join(test_data, "models", m) for m in ("mlp", "llama", "bert", "resnet")}


@pytest.fixture(scope="session")
def test_data():
    """gen_test_data's captures. ctest starts a file that names this fixture (or PARITY_TEST_DATA)
    after gen_test_data, and any other file at once (tests/CMakeLists.txt): a helper module that
    reads the captures takes this path from its caller, never from the environment."""
    path = os.environ.get("PARITY_TEST_DATA")
    if not path or not os.path.isdir(path):
        pytest.skip("PARITY_TEST_DATA is not set (run through ctest)")
    return path


def standalone_env(home):
    """The environment a standalone repro.py is run in by the tests: no PYTHONPATH (it needs only
    torch and safetensors), its own HOME; the suite's Inductor cache, compiler and thread count
    kept (where it compiles, the kernels the minify compiled are found, not built again)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    env.update({k: os.environ[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_VEC_ISA_OK", "CXX", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
                if k in os.environ})
    return env


def run_parity(parity_bin, *args, env=None, cwd=None, timeout=None, input=None):
    """`parity ARGS` as subprocess.run(capture_output=True, text=True, ...) runs it: forked by the
    suite's parity zygote server where it runs (parity_fork.py), else exec'd."""
    argv = [parity_bin, *map(str, args)]
    return (parity_fork.run(argv, env=env, cwd=cwd, timeout=timeout, input=input) or
            subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, input=input))


def manifest(d):
    """A repro dir's manifest."""
    import json
    return json.load(open(os.path.join(str(d), "manifest.json")))


def graph_json(d, entry):
    """The graph JSON of a manifest's graph entry."""
    import json
    return json.load(open(os.path.join(str(d), entry["file"])))


def verify(parity_bin, out, *args, env=None):
    """`parity verify --output-dir out ARGS` (in `env`, else this process's environment): the
    process and the records it wrote."""
    import json
    r = run_parity(parity_bin, "verify", "--output-dir", str(out), *map(str, args), env=env)
    path = os.path.join(str(out), "results.jsonl")
    return r, ([json.loads(line) for line in open(path)] if os.path.exists(path) else [])


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """A capture cache of the test file's own (`--cache-dir`): its suite models captured once."""
    return str(tmp_path_factory.mktemp("parity-cache"))


def verify_cached(parity_bin, cache_dir, out, *args):
    """`parity verify --cache-dir cache_dir --output-dir out ARGS`: the process and its records."""
    return verify(parity_bin, out, "--cache-dir", cache_dir, *args)


def minify(parity_bin, src, out, *args):
    """`parity minify SRC --out out ARGS`: the process and its summary.json (None when it wrote none)."""
    import json
    r = run_parity(parity_bin, "minify", src, "--out", str(out), *args)
    path = os.path.join(str(out), "summary.json")
    return r, (json.load(open(path)) if os.path.exists(path) else None)


def call_functions(summary):
    """The ops of a minify summary's culprit, in order."""
    return [c["target"] for c in summary["culprit_ops"]]


def stamp_version(d, version):
    """Rewrites repro dir `d`'s manifest and graphs as format `version` (what an older capture
    wrote, for tests that older dirs load unchanged)."""
    import json
    m = manifest(d)
    m["version"] = version
    json.dump(m, open(os.path.join(str(d), "manifest.json"), "w"))
    for e in m["graphs"]:
        g = graph_json(d, e)
        g["version"] = version
        json.dump(g, open(os.path.join(str(d), e["file"]), "w"))


def wait_until(cond, seconds, every=0.1):
    """Whether `cond()` holds within `seconds`, asked every `every` seconds."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return cond()


# A test file's process ends as parity's own Python processes do (parity_capture/ending.py): once
# the session is over and its summary written, without the interpreter's teardown of torch,
# dynamo and Inductor (0.5-1.3 s of each file's process, measured with strace on a 2-core CPU).
# Only under ctest, whose entries read the exit status alone; pytest by hand ends as it always does.
# Only where the tests imported torch: importing parity_capture.ending imports the package, torch
# among it (2.7 s), which a file that drives only the binary never needed.
_EXIT_STATUS = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if os.environ.get("PARITY_BIN") and _EXIT_STATUS and "torch" in sys.modules:
        from parity_capture.ending import end
        end(_EXIT_STATUS[-1])
