"""The worker's host op calls (tools/parity_capture/worker.py): a plan repeat runs on the current
contents of parity's segment, its results go where they went last time when they fit ({"same":
true}, or the 8-byte frame), and a result whose shape depends on the data is placed and described
anew; over the socket, frames and JSON lines mix on one connection."""
import importlib
import json
import mmap
import os
import socket
import struct
import subprocess
import sys
import time

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")
sys.path.insert(0, HERE)
sys.path.insert(0, TOOLS)
from parity_capture import shm, worker  # noqa: E402

importlib.import_module("custom_op_model")  # registers parity_test::positives


class ArgSegment:
    """parity's side of the arguments: a parity-shm-<pid>-* file holding one float32 vector."""

    def __init__(self, n: int) -> None:
        self.path = os.path.join(shm.shm_dir(), f"{shm.PREFIX}{os.getpid()}-test{time.monotonic_ns()}")
        self.size = 4096
        with open(self.path, "w+b") as f:
            f.truncate(self.size)
            self.map = mmap.mmap(f.fileno(), self.size)
        self.n = n

    def write(self, values) -> None:
        self.map[: 4 * self.n] = torch.tensor(values, dtype=torch.float32).numpy().tobytes()

    def request(self, plan: int):
        return {"cmd": "host_call", "op": "parity_test::positives", "args": [{"tensor": {"key": "t0", "device": "cpu"}}],
                "shm": {"path": self.path, "size": self.size},
                "tensors": [{"dtype": "float32", "shape": [self.n], "offset": 0}], "plan": plan}

    def close(self) -> None:
        os.unlink(self.path)


def read_result(answer):
    (out,) = answer["outputs"]
    with open(answer["shm"]["path"], "rb") as f:
        data = f.read()
    n = out["shape"][0]
    return torch.frombuffer(bytearray(data[out["offset"]: out["offset"] + 4 * n]), dtype=torch.float32).tolist() if n else []


@pytest.fixture
def seg():
    s = ArgSegment(6)
    yield s
    s.close()
    worker._PLANS.clear()


def frame(plan: int) -> bytes:
    return worker.FRAME.pack(worker.FRAME_MAGIC, plan)


def test_a_repeat_reads_the_segment_anew_and_answers_same_when_its_results_fit(seg):
    seg.write([1, -1, 2, -2, 3, -3])
    first = worker.handle(seg.request(plan=1))
    assert first["ok"], first
    assert read_result(first) == [1, 2, 3]
    seg.write([4, -1, 5, -2, 6, -3])  # three positives again: the same places
    assert worker._repeat(frame(1)) == worker.SAME_FRAME
    assert read_result(first) == [4, 5, 6]
    seg.write([7, 8, 9, 10, -1, -1])  # four: described anew, as a JSON line
    line = worker._repeat(frame(1))
    again = json.loads(line)
    assert line.endswith(b"\n") and again["ok"] and not again.get("same")
    assert again["outputs"][0]["shape"] == [4]
    assert read_result(again) == [7, 8, 9, 10]
    seg.write([-1] * 6)  # none: an empty result
    empty = json.loads(worker._repeat(frame(1)))
    assert empty["outputs"][0]["shape"] == [0] and read_result(empty) == []


def test_an_unknown_plan_answers_a_typed_error(seg):
    answer = json.loads(worker._repeat(frame(99)))
    assert not answer["ok"] and answer["error_type"] == "UnknownPlan"


def test_the_oldest_plan_goes_when_too_many_are_kept(seg, monkeypatch):
    monkeypatch.setattr(worker, "_MAX_PLANS", 2)
    seg.write([1, -1, 2, -2, 3, -3])
    for plan in (1, 2, 3):
        assert worker.handle(seg.request(plan=plan))["ok"]
    assert sorted(worker._PLANS) == [2, 3]
    assert json.loads(worker._repeat(frame(1)))["error_type"] == "UnknownPlan"  # parity sends it whole again
    assert worker._repeat(frame(3)) == worker.SAME_FRAME


def test_frames_and_lines_share_one_connection(seg, tmp_path):
    sock = str(tmp_path / "w.sock")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TOOLS, HERE]))
    proc = subprocess.Popen([sys.executable, "-m", "parity_capture.worker", "--socket", sock], env=env)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sock)
        f = c.makefile("rwb")

        def line(req):
            f.write((json.dumps(req) + "\n").encode())
            f.flush()
            return json.loads(f.readline())

        assert line({"cmd": "import_modules", "modules": ["custom_op_model"], "id": 1})["ok"]
        seg.write([1, -1, 2, -2, 3, -3])
        first = line(dict(seg.request(plan=5), id=2))
        assert first["ok"] and read_result(first) == [1, 2, 3]
        seg.write([3, -1, 2, -2, 1, -3])
        f.write(frame(5))
        f.flush()
        assert f.read(8) == worker.SAME_FRAME
        assert read_result(first) == [3, 2, 1]
        assert line({"cmd": "ping", "id": 3})["ok"]  # a line after a frame
        f.write(frame(6))
        f.flush()
        assert json.loads(f.readline())["error_type"] == "UnknownPlan"
        assert struct.unpack("<c3xI", worker.SAME_FRAME) == (b"\x01", 0)
        line({"cmd": "shutdown"})
        proc.wait(timeout=30)
    finally:
        proc.kill()


def test_a_client_that_dies_while_its_request_runs_ends_only_its_connection(tmp_path, monkeypatch):
    """A job process that crashes while the worker runs its request (a next job's crash while the
    backend's compile is under way) leaves an answer nobody reads: the worker drops it and serves
    the next client, as the driver expects when it keeps that worker (runtime/jobs.cpp Finish)."""
    import threading
    sock = str(tmp_path / "w.sock")
    started, release = threading.Event(), threading.Event()

    def slow(req):
        started.set()
        release.wait(30)
        return {"answer": "x" * (1 << 20)}  # more than a socket buffer: the write meets the dead peer

    monkeypatch.setitem(worker.COMMANDS, "slow", slow)
    server = threading.Thread(target=worker.serve, args=(sock,), daemon=True)
    server.start()
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        assert time.monotonic() < deadline
        time.sleep(0.01)

    def connect():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(30)  # a worker that died with the first client fails the test, not hangs it
        c.connect(sock)
        return c, c.makefile("rwb")

    dead, f = connect()
    f.write(b'{"cmd": "slow", "id": 1}\n')
    f.flush()
    assert started.wait(30)
    f.close()
    dead.close()  # the client is gone before its answer
    release.set()
    c, f = connect()
    f.write(b'{"cmd": "ping", "id": 2}\n')
    f.flush()
    assert json.loads(f.readline())["ok"]
    f.write(b'{"cmd": "shutdown"}\n')
    f.flush()
    assert json.loads(f.readline())["ok"]
    server.join(30)
    assert not server.is_alive()
    c.close()


def test_a_pool_entrys_worker_ends_only_when_its_entry_is_free(tmp_path, monkeypatch):
    """_Pool (the worker of a pool entry, runtime/worker_pool.h): never ends while a parity process
    holds the entry's lock; once free, after its idle seconds, at once when it imported a client's
    modules; ending, it takes the lock and removes its socket, so no process adopts it."""
    import fcntl
    lock, sock = tmp_path / "k-0.lock", tmp_path / "k-0.sock"
    lock.write_text("")
    sock.write_text("")
    clock = [100.0]
    pool = worker._Pool(str(lock), 5.0, str(sock))
    pool.clock = lambda: clock[0]
    holder = os.open(lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    clock[0] += 60
    assert not pool.should_end()  # held: however long
    os.close(holder)
    assert not pool.should_end()  # free from now
    clock[0] += 4
    assert not pool.should_end()
    clock[0] += 2
    assert pool.should_end() and not sock.exists()
    os.close(pool.held)  # as the worker's exit does
    sock.write_text("")
    fresh = worker._Pool(str(lock), 5.0, str(sock))
    monkeypatch.setattr(worker, "_TAINTED", True)
    assert fresh.should_end() and not sock.exists()  # tainted: at once


def test_an_experiment_starts_beside_its_starting_worker_and_ends_when_that_worker_dies(tmp_path, test_data):
    """A job starts without waiting for its slot's worker to listen (the reference runs meanwhile);
    a worker that dies starting ends the job at once, saying so, never at the timeout."""
    parity_bin = os.environ.get("PARITY_BIN")
    if not parity_bin:
        pytest.skip("PARITY_BIN is not set (run through ctest)")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 1\necho 'no torch here' >&2\nexit 3\n")
    fake.chmod(0o755)
    env = dict(os.environ, PARITY_PYTHON=str(fake))
    t0 = time.monotonic()
    r = subprocess.run([parity_bin, "verify", os.path.join(test_data, "models", "mlp"), "--backend", "inductor",
                        "--output-dir", str(tmp_path / "out"), "--timeout", "600"], capture_output=True, text=True, env=env)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    rec = json.loads(open(tmp_path / "out" / "results.jsonl").readline())
    assert rec["verification_code"] == "VERIFIER_DIDNT_RUN", rec
    assert "exited at start-up" in rec["error"], rec["error"]
    assert took < 60, took  # not the 600 s deadline
    # The reference ran while the worker was starting: its phases are in the record.
    assert rec["phase"] in ("backend", "eager", "fp64_reference", "eager_2nd_run", "load", "capability"), rec


def test_a_compiler_bisection_taints_its_worker(monkeypatch):
    """A worker that ran compiler_bisect (Inductor's bisector: class-level state, subsystems held
    back) is not handed to a later run: tainted, it ends once free (runtime/worker_pool.h)."""
    monkeypatch.setattr(worker, "_TAINTED", False)
    resp = worker.handle({"cmd": "compiler_bisect", "signature": {"kind": "crash"}})
    assert resp["ok"] and resp["bisected"] is False, resp
    assert worker._TAINTED
    monkeypatch.setattr(worker, "_TAINTED", False)
    assert worker.handle({"cmd": "ping"})["ok"] and not worker._TAINTED  # other requests do not


def test_importing_a_module_beyond_its_own_import_taints_its_worker(monkeypatch):
    """import_modules taints a pool worker (it ends once free) only for a module beyond its own
    --import (PARITY_IMPORT): those it imported at its start, and every later user of its pool
    entry names them too (the key holds them). A repro dir's host op from the --import module left
    the worker tainted, so a kept worker that ran one ended at its release."""
    monkeypatch.setenv("PARITY_IMPORT", "json,custom_op_model")
    monkeypatch.setattr(worker, "_TAINTED", False)
    assert worker.handle({"cmd": "import_modules", "modules": ["custom_op_model"]})["ok"]
    assert not worker._TAINTED
    assert worker.handle({"cmd": "import_modules", "modules": ["custom_op_model", "colorsys"]})["ok"]
    assert worker._TAINTED
