"""The Python test entries' start-up, paid once per suite run (tests/CMakeLists.txt): a server that
has imported torch, dynamo, Inductor, pytest and parity's Python package forks each entry's pytest
run from there, instead of each entry's own interpreter importing them again (measured on a 2-core
VM: 2.6-3.0 CPU-s less a file, for some thirty files).

    pytest_fork.py --start SOCKET    start the server (detached), wait until it listens
    pytest_fork.py --stop SOCKET     end it, once its runs have ended
    pytest_fork.py ARGS...           one entry: `python -m pytest ARGS`, forked by the server at
                                     $PARITY_TEST_PYTEST_SERVER, else run here as it always was

A forked run is the run `python -m pytest ARGS` would be: the client's working dir and standard
streams (passed over the socket), sys.path[0] that dir, a session and process group of its own,
and the client's environment, which must be the server's own (what torch and Inductor read as they
are imported: a client whose environment differs, as ctest's vector_isa_entries' does, is refused
and runs pytest itself). Its exit status, or the signal that ended it, is the client's. A client
that ends first (ctest's timeout) ends its run: the server kills the run's process group. Only
this user may connect (the socket is made 0600, the peer's uid checked). The server ends when told
to (ctest's cleanup fixture) or after IDLE_S seconds without a client.

Without torch: the client starts in a few hundredths of a second; only the server imports."""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback

SERVER_ENV = "PARITY_TEST_PYTEST_SERVER"
IDLE_S = 120.0
READY_S = 90.0  # the server's imports, at most (about 4 s on a 2-core machine)
STOP_S = 60.0  # --stop waits this long at most for the runs to end
# What the server imports before it serves (each fork starts with them imported); a test of this
# file sets PARITY_TEST_PYTEST_PRELOAD to serve without torch.
PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch.export", "numpy", "safetensors.torch",
           "pytest", "parity_capture.capture", "parity_capture.dynamo_backend", "parity_capture.reader")
# Variables a shell sets for itself, not for what a run does.
_IGNORED = ("_", "OLDPWD", "PWD", "SHLVL")
_MAX_REQUEST = 1 << 20


def _line(sock, data: bytes = b"") -> dict:
    """One JSON line from `sock`, after the `data` already received of it ({} at EOF before one)."""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            return {}
        data += chunk
        if len(data) > _MAX_REQUEST:
            raise ValueError("request too long")
    return json.loads(data)


def _send(sock, obj) -> None:
    try:
        sock.sendall((json.dumps(obj) + "\n").encode())
    except OSError:
        pass  # the client is gone: its run is killed as the server notices


def _env_difference(env: dict) -> str:
    """The first variable in which `env` differs from this process's own ('' if none)."""
    mine = {k: v for k, v in os.environ.items() if k not in _IGNORED}
    theirs = {k: v for k, v in env.items() if k not in _IGNORED}
    for k in sorted(set(mine) | set(theirs)):
        if mine.get(k) != theirs.get(k):
            return k
    return ""


# ---- the client ------------------------------------------------------------------------------

def _plain(args, why: str = "") -> None:
    """`python -m pytest ARGS` in this process (never returns)."""
    if why:
        print(f"pytest_fork: pytest started here: {why}", file=sys.stderr, flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *args])


def run(args) -> None:
    path = os.environ.get(SERVER_ENV, "")
    if not path or not os.path.exists(path):
        _plain(args)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        request = {"argv": list(args), "cwd": os.getcwd(), "env": dict(os.environ), "executable": sys.executable}
        socket.send_fds(sock, [(json.dumps(request) + "\n").encode()], [0, 1, 2])
        answer = _line(sock)
    except (OSError, ValueError) as e:
        _plain(args, f"the server at {path} did not answer ({e})")
    if "pid" not in answer:
        _plain(args, answer.get("refused", f"the server at {path} did not answer"))
    status = _line(sock)
    if "exit" in status:
        os._exit(status["exit"])
    if "signal" in status:
        signal.signal(status["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), status["signal"])
        os._exit(128 + status["signal"])
    print(f"pytest_fork: the server at {path} ended before run {answer['pid']} did", file=sys.stderr, flush=True)
    os._exit(3)


# ---- the server ------------------------------------------------------------------------------

def _run_forked(request: dict, fds, closing) -> None:
    """In the fork: become the run `python -m pytest ARGS` would be, run it, exit (never returns)."""
    code = 3
    try:
        os.setsid()
        for s in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter's start-up leaves it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for s in closing:
            s.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        import pytest
        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *request["argv"]]
        sys.path[0] = os.getcwd()
        code = int(pytest.main())  # what `python -m pytest` runs: its arguments from sys.argv
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        # The exit a script's end makes, without unwinding into the server's frames.
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Server:
    def __init__(self, path: str):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.runs = {}  # pid -> the client's connection
        self.gone = set()  # connections of clients that ended before their runs (being killed)
        self.stopping = []  # connections waiting for the runs to end
        self.last = time.monotonic()

    def listen(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
        old = os.umask(0o177)
        try:
            self.listener.bind(self.path)
        finally:
            os.umask(old)
        self.listener.listen(16)

    def serve(self) -> None:
        while True:
            self.reap()
            if self.stopping and not self.runs:
                break
            if not self.runs and not self.stopping and time.monotonic() - self.last > IDLE_S:
                break
            watched = [c for c in self.runs.values() if c not in self.gone]
            readable, _, _ = select.select([self.listener, *watched], [], [], 0.2)
            for s in readable:
                if s is self.listener:
                    self.accept()
                else:
                    self.client_gone(s)
        for conn in self.stopping:
            _send(conn, {"stopped": True})
            conn.close()
        os.unlink(self.path)

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10)  # a client sends its request as it connects
        self.last = time.monotonic()
        fds = []
        try:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
            if uid != os.getuid():
                raise PermissionError(f"uid {uid} is not this server's")
            data, fds, _, _ = socket.recv_fds(conn, 65536, 3)  # the streams come with the line's first bytes
            request = _line(conn, data) if data else {}
        except (OSError, ValueError) as e:
            for fd in fds:
                os.close(fd)
            _send(conn, {"refused": f"bad request: {e}"})
            conn.close()
            return
        if request.get("stop"):
            self.stopping.append(conn)
            return
        why = self.refusal(request, fds)
        if why:
            for fd in fds:
                os.close(fd)
            _send(conn, {"refused": why})
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_forked(request, fds, [self.listener, conn, *self.runs.values(), *self.stopping])
        for fd in fds:
            os.close(fd)
        self.runs[pid] = conn
        _send(conn, {"pid": pid})

    def refusal(self, request: dict, fds) -> str:
        if len(fds) != 3:
            return f"{len(fds)} standard streams passed, not 3"
        if request.get("executable") != sys.executable:
            return f"the client's Python {request.get('executable')} is not the server's {sys.executable}"
        differs = _env_difference(request.get("env", {}))
        if differs:
            return f"the environment's {differs} is not the server's"
        return ""

    def client_gone(self, conn) -> None:
        """A client's connection readable while its run goes on: it ended (ctest's timeout)."""
        try:
            gone = not conn.recv(1)
        except OSError:
            gone = True
        if gone:
            self.gone.add(conn)
            pid = next(p for p, c in self.runs.items() if c is conn)
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass

    def reap(self) -> None:
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.runs.pop(pid, None)
            if conn is None:
                continue
            self.gone.discard(conn)
            if os.WIFSIGNALED(status):
                _send(conn, {"signal": os.WTERMSIG(status)})
            else:
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()
            self.last = time.monotonic()


def serve(path: str) -> int:
    """The server: imports, then listens; 'ready' (or why not) on stdout, which it then closes."""
    import importlib
    try:
        preload = os.environ.get("PARITY_TEST_PYTEST_PRELOAD")
        for name in (preload.split(",") if preload is not None else PRELOAD):
            if name:
                importlib.import_module(name)
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:  # a fork of a process with threads may hang in their locks
            raise RuntimeError(f"its imports started {threads - 1} threads")
        server = Server(path)
        server.listen()
    except Exception as e:  # the entries run pytest themselves
        print(f"not serving: {type(e).__name__}: {e}", flush=True)
        return 1
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    server.serve()
    return 0


def start(path: str) -> int:
    """Ends the server at `path` if one listens there (it may have imported other sources), starts
    one detached, and waits until it listens (READY_S at most). Exit 0 whatever happens: ctest's
    fixture must not fail, and without a server each entry starts pytest itself."""
    try:
        stop(path)
        with open(path + ".log", "w") as log:
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", path], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=log, start_new_session=True, text=True)
        said = proc.stdout.readline().strip() if select.select([proc.stdout], [], [], READY_S)[0] else ""
        if not said:
            proc.kill()
            said = f"not ready within {READY_S:.0f} s (killed; see {path}.log)"
        proc.stdout.close()
        print(f"pytest_fork: server {proc.pid} at {path}: {said}")
    except Exception as e:  # noqa: BLE001 (said; the entries run pytest themselves)
        print(f"pytest_fork: no server at {path}: {type(e).__name__}: {e}")
    return 0


def stop(path: str) -> int:
    """Asks the server at `path` to end once its runs have; exit 0 whatever happens."""
    if not os.path.exists(path):
        return 0
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(STOP_S)  # a run that outlives its entry's kill does not hold ctest's cleanup
    try:
        sock.connect(path)
        _send(sock, {"stop": True})
        _line(sock)
    except (OSError, ValueError):
        pass
    return 0


def _parity_server(what: str) -> None:
    """The parity binary's zygote server (parity_fork.py) starts and ends with this one: the
    entries' parity runs are forked by it."""
    path, parity_bin = os.environ.get("PARITY_TEST_ZYGOTE"), os.environ.get("PARITY_BIN")
    if not path or what == "--serve":
        return
    import parity_fork
    if what == "--stop":
        parity_fork.stop(path)
    elif parity_bin:
        print(f"pytest_fork: {parity_fork.start(path, parity_bin)}")


def main(argv) -> int:
    if len(argv) == 2 and argv[0] in ("--start", "--stop", "--serve"):
        if argv[0] == "--start":
            _parity_server(argv[0])
        code = {"--start": start, "--stop": stop, "--serve": serve}[argv[0]](argv[1])
        if argv[0] == "--stop":  # once the pytest runs have ended, their parity runs with them
            _parity_server(argv[0])
        return code
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
