"""The Python tests' runs of the parity binary, forked by a parity zygote server (util/zygote.h,
ServeZygote) instead of exec'd: each exec pays libtorch's static initialisation again (0.17 CPU-s
on a 2-core machine) and the suite runs parity some 400 times.

    start(path), stop(path)    the server at `path` ($PARITY_TEST_ZYGOTE; pytest_fork.py's --start
                               and --stop start and end it with the entries' pytest server)
    run(argv, env, cwd, timeout, input)
                               what subprocess.run(argv, capture_output=True, text=True, ...) returns,
                               the child forked by the server; None where there is no server, or it
                               refused (an environment that differs in what parity reads as it
                               loads): the caller runs the binary itself

A forked child is the run an exec would have been: the caller's working dir, environment and
standard streams, its exit status or the signal that ended it; it runs in a process group of its
own, which a timeout kills (subprocess.TimeoutExpired, as subprocess.run raises).

Without torch: the harness's helpers import it in the tests' own processes only where they use it."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time

SERVER_ENV = "PARITY_TEST_ZYGOTE"
IDLE_S = 300  # the server ends after this long without a request (a suite interrupted leaves none)
READY_S = 10.0  # a started server listens within this
# The server answers a request with the child's pid at once; one that has not answered within this
# is an error, never a reason to exec instead: it may still fork the child, which would then run
# beside the exec'd one (the same command, the same output dir).
ANSWER_S = 120.0


def _text(data: bytes) -> str:
    """As subprocess's text mode reads a stream: UTF-8, universal newlines."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def run(argv, env=None, cwd=None, timeout=None, input=None):
    path = os.environ.get(SERVER_ENV)
    if not path or not os.path.exists(path):
        return None
    env = dict(os.environ if env is None else env)
    fields = [os.path.abspath(cwd or os.getcwd()), str(len(argv)), *map(str, argv), *(f"{k}={v}" for k, v in env.items())]
    payload = ("\0".join(fields) + "\0").encode()
    status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with status, tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input is not None:
            stdin.write(input.encode() if isinstance(input, str) else input)
            stdin.seek(0)
        try:
            with theirs, socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
                conn.connect(path)
                socket.send_fds(conn, [payload], [theirs.fileno(), stdin.fileno(), out.fileno(), err.fileno()])
        except OSError:
            return None  # gone (idle), or the request too large: the binary itself
        lines = status.makefile("r")
        status.settimeout(ANSWER_S)
        try:
            first = lines.readline().strip()
        except (socket.timeout, TimeoutError):
            raise RuntimeError(f"the parity zygote server at {path} did not answer within {ANSWER_S:.0f} s: {argv}")
        if not first.startswith("pid "):
            return None  # refused, or the server ended before it forked (its children die with it)
        pid = int(first[4:])
        status.settimeout(timeout)
        try:
            end = lines.readline().strip()
        except (socket.timeout, TimeoutError):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            raise subprocess.TimeoutExpired(argv, timeout)
        if end.startswith("exit "):
            code = int(end[5:])
        elif end.startswith("signal "):
            code = -int(end[7:])
        else:
            raise RuntimeError(f"the parity zygote server at {path} ended during the run of {argv}")
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(list(argv), code, _text(out.read()), _text(err.read()))


def _server_pid(path: str) -> int:
    """The pid the server at `path` was started with, where that process still is one (0: none)."""
    try:
        pid = int(open(path + ".pid").read())
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except (OSError, ValueError):
        return 0
    return pid if len(cmdline) > 2 and cmdline[1] == b"_zygote-server" and cmdline[2] == path.encode() else 0


def start(path: str, parity_bin: str) -> str:
    """Ends a server at `path`, starts one detached (its environment this process's) and waits until
    it listens. What happened, in words; never raises (without a server, the tests exec parity)."""
    try:
        stop(path)
        with open(path + ".log", "w") as log:
            proc = subprocess.Popen([parity_bin, "_zygote-server", path, str(IDLE_S)], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, start_new_session=True)
        with open(path + ".pid", "w") as f:
            f.write(str(proc.pid))
        deadline = time.monotonic() + READY_S
        while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if os.path.exists(path):
            return f"parity zygote server {proc.pid} at {path}"
        return f"no parity zygote server at {path} (see {path}.log)"
    except Exception as e:  # noqa: BLE001 (said; the tests exec parity)
        return f"no parity zygote server at {path}: {type(e).__name__}: {e}"


def stop(path: str) -> None:
    """Ends the server at `path` (SIGTERM: its children, runs of entries that ctest ended, die with it)."""
    pid = _server_pid(path)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + 5
        while _server_pid(path) and time.monotonic() < deadline:
            time.sleep(0.01)
