"""The fork server (tools/parity_capture/forkserver.py), driven over its socket as parity drives it
(runtime/fork_server.cpp): each request forks a worker that answers its own pid, runs in a session
of its own and is no child of the server; one server per lock; a bad request is refused and the
server serves on; it ends after its idle seconds, its socket gone."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from conftest import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")


def start_server(d, keep_idle):
    env = dict(os.environ, PYTHONPATH=TOOLS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "parity_capture.forkserver", "--socket", str(d / "k-fs.sock"),
                             "--lock", str(d / "k-fs.lock"), "--keep-idle", str(keep_idle)],
                            env=env, stdout=open(d / "k-fs.log", "a"), stderr=subprocess.STDOUT)


def ask(d, request_line):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    assert wait_until(lambda: (d / "k-fs.sock").exists(), 20)
    s.connect(str(d / "k-fs.sock"))
    s.sendall(request_line)
    s.settimeout(60)
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    s.close()
    return answer


def fork(d, n):
    env = dict(os.environ, PYTHONPATH=TOOLS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    req = {"argv": ["--socket", str(d / f"w{n}.sock")], "log": str(d / f"w{n}.log"), "env": env, "cwd": str(d)}
    return json.loads(ask(d, (json.dumps(req) + "\n").encode()))["pid"]


def ping(sock):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.sendall(b'{"id": 1, "cmd": "ping"}\n')
    s.settimeout(30)
    line = s.makefile().readline()
    s.close()
    return json.loads(line)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("served")
    server = start_server(tmp_path, keep_idle=30)
    assert wait_until(lambda: (tmp_path / "k-fs.sock").exists(), 20)  # it listens: it holds the lock
    yield tmp_path, server
    server.kill()
    server.wait()


def test_each_request_forks_a_worker_of_its_own_session_that_serves(served):
    d, server = served
    pids = [fork(d, n) for n in range(2)]
    try:
        assert len(set(pids)) == 2 and server.pid not in pids
        for n, pid in enumerate(pids):
            assert wait_until(lambda: (d / f"w{n}.sock").exists(), 60), (d / f"w{n}.log").read_text()
            assert ping(d / f"w{n}.sock")["ok"], (d / f"w{n}.log").read_text()
            assert os.getsid(pid) == pid  # its own session: parity's Stop() kills the group
            with open(f"/proc/{pid}/stat") as f:
                assert int(f.read().rsplit(")", 1)[1].split()[1]) != server.pid  # forked twice: no child of the server
    finally:
        for pid in pids:
            os.kill(pid, 9)


def test_one_server_per_lock_and_a_bad_request_is_refused(served):
    d, server = served
    second = start_server(d, keep_idle=30)
    assert second.wait(timeout=30) == 0  # the lock is held: it leaves at once
    assert ask(d, b"not json\n") == b""  # refused: the connection closes unanswered
    assert ask(d, b'{"argv": "--socket"}\n') == b""
    pid = fork(d, 2)  # and it serves on
    os.kill(pid, 9)
    log = (d / "k-fs.log").read_text()
    assert "request refused" in log
    # It prepared without a failure: imports, the vector ISA and its first compile (warm.first_compile_paid).
    assert "Traceback" not in log and "failed" not in log, log
    assert not (d / "k-fs.refused").exists()


def test_it_ends_after_its_idle_seconds_and_a_gone_client_gets_no_worker(tmp_path):
    server = start_server(tmp_path, keep_idle=3)
    try:
        assert wait_until(lambda: (tmp_path / "k-fs.sock").exists(), 20)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(tmp_path / "k-fs.sock"))
        env = dict(os.environ, PYTHONPATH=TOOLS)
        s.sendall((json.dumps({"argv": ["--socket", str(tmp_path / "gone.sock")], "log": str(tmp_path / "gone.log"),
                               "env": env}) + "\n").encode())
        s.close()  # gone before the answer: the fork finds no one to answer and ends
        assert server.wait(timeout=60) == 0
        assert not (tmp_path / "k-fs.sock").exists()
        time.sleep(1)
        assert not (tmp_path / "gone.sock").exists()
    finally:
        server.kill()


def run_request(d, name, argv):
    """A {"run": "rank_replay"} request's connection, kept open (the run's lifeline), its request sent."""
    env = dict(os.environ, PYTHONPATH=TOOLS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(d / "k-fs.sock"))
    s.sendall((json.dumps({"run": "rank_replay", "argv": argv, "log": str(d / f"{name}.log"), "env": env,
                           "cwd": str(d)}) + "\n").encode())
    s.settimeout(60)
    return s, s.makefile()


def test_a_run_answers_its_pid_then_its_exit_and_dies_with_its_client(served):
    d, _ = served
    # rank_replay of a request that is no file: its main raises, the traceback in its log, exit 1.
    s, lines = run_request(d, "missing", [str(d / "no-such-request.json")])
    pid = json.loads(lines.readline())["pid"]
    assert json.loads(lines.readline()) == {"exit": 1}
    lines.close()
    s.close()
    assert not alive(pid)
    assert "no-such-request.json" in (d / "missing.log").read_text()
    # A request that is a FIFO nobody writes: the run waits in open() until its client goes.
    os.mkfifo(d / "never.json")
    s, lines = run_request(d, "never", [str(d / "never.json")])
    pid = json.loads(lines.readline())["pid"]
    assert wait_until(lambda: alive(pid) and os.getsid(pid) == pid, 10)  # its own session: Kill() ends its group
    lines.close()
    s.close()  # the lifeline: its supervisor kills it
    assert wait_until(lambda: not alive(pid), 10)
    assert ask(d, b'{"run": "os", "argv": [], "log": "x.log"}\n') == b""  # only the modules RUNS names


def test_a_fork_takes_the_request_s_pythonpath_and_threads_unless_a_module_would_be_shadowed(served, tmp_path):
    """The key leaves PYTHONPATH, a slot's thread counts and its compile threads to the fork
    (runtime/worker_pool.cpp): a request whose path adds a dir gets it in sys.path where Python
    puts it, its thread count (the server imported with one) and Inductor's compile threads its
    environment sets (the server's config read its own at import); a path whose added dir holds a module the server imported
    (json) or an installed distribution (its entry points were read), or that drops the dir
    parity_capture came from, is refused, answered with why, and
    parity starts that worker itself (runtime/fork_server.cpp)."""
    d, _ = served
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "probe_mod.py").write_text(
        "import json, os, sys, torch\n"
        "from torch._inductor import config\n"
        "json.dump({'threads': torch.get_num_threads(), 'path': sys.path, 'compile_threads': config.compile_threads},\n"
        "          open(os.environ['PROBE_OUT'], 'w'))\n")
    base = TOOLS + os.pathsep + os.environ.get("PYTHONPATH", "")

    def request(name, pythonpath, **env):
        env = dict(os.environ, PYTHONPATH=pythonpath, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", **env)
        req = {"argv": ["--socket", str(d / f"{name}.sock")], "log": str(d / f"{name}.log"), "env": env, "cwd": str(d)}
        return json.loads(ask(d, (json.dumps(req) + "\n").encode()))

    answer = request("probe", base + os.pathsep + str(extra), PARITY_IMPORT="probe_mod", PROBE_OUT=str(tmp_path / "probe.json"),
                     TORCHINDUCTOR_COMPILE_THREADS="3")
    try:
        assert wait_until(lambda: (tmp_path / "probe.json").exists(), 60), (d / "probe.log").read_text()
        seen = json.load(open(tmp_path / "probe.json"))
        assert seen["threads"] == 2 and seen["compile_threads"] == 3, seen
        tools_at = seen["path"].index(TOOLS)
        assert str(extra) in seen["path"][tools_at:tools_at + 3], seen["path"]
    finally:
        os.kill(answer["pid"], 9)
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "json.py").write_text("")
    refused = request("shadow", str(tmp_path / "shadow") + os.pathsep + base)
    assert "pid" not in refused and "holds json" in refused["refused"], refused
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "vendor_be-0.1.dist-info").mkdir()  # its entry points: dynamo's backends
    refused = request("dist", base + os.pathsep + str(tmp_path / "dist"))
    assert "vendor_be-0.1.dist-info" in refused["refused"], refused
    refused = request("dropped", str(extra))
    assert "parity_capture" in refused["refused"] and TOOLS in refused["refused"], refused
    assert not (d / "shadow.log").exists() and not (d / "dropped.log").exists()


def test_a_server_that_keeps_nothing_serves_the_request_waiting_and_ends(tmp_path):
    """--keep-idle 0 (a run that keeps no workers adopted one, which then had to be replaced): the
    request already waiting is served, then the server ends instead of serving forever."""
    server = start_server(tmp_path, keep_idle=0)
    try:
        pid = fork(tmp_path, 0)
        os.kill(pid, 9)
        assert server.wait(timeout=60) == 0
        assert not (tmp_path / "k-fs.sock").exists()
    finally:
        server.kill()
