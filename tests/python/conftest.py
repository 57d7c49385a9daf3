import os
import subprocess

import pytest

# Tests keep no workers across runs unless one asks (test_worker_pool.py, in a pool of its own):
# a developer's $PARITY_KEEP_WORKERS would leave the suite's workers in their pool.
os.environ.pop("PARITY_KEEP_WORKERS", None)


@pytest.fixture(scope="session")
def parity_bin():
    path = os.environ.get("PARITY_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("PARITY_BIN is not set (run through ctest)")
    return path


@pytest.fixture(scope="session")
def test_data():
    path = os.environ.get("PARITY_TEST_DATA")
    if not path or not os.path.isdir(path):
        pytest.skip("PARITY_TEST_DATA is not set (run through ctest)")
    return path


def run_parity(parity_bin, *args):
    return subprocess.run([parity_bin, *args], capture_output=True, text=True)


def manifest(d):
    """A repro dir's manifest."""
    import json
    return json.load(open(os.path.join(str(d), "manifest.json")))


def graph_json(d, entry):
    """The graph JSON of a manifest's graph entry."""
    import json
    return json.load(open(os.path.join(str(d), entry["file"])))


def verify(parity_bin, out, *args):
    """`parity verify --output-dir out ARGS`: the process and the records it wrote."""
    import json
    r = run_parity(parity_bin, "verify", "--output-dir", str(out), *map(str, args))
    path = os.path.join(str(out), "results.jsonl")
    return r, ([json.loads(line) for line in open(path)] if os.path.exists(path) else [])


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
