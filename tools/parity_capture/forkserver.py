"""A worker pool key's fork server (runtime/fork_server.h): one Python process that has imported
torch, dynamo and Inductor once, and forks each new worker of its key from there instead of a fresh
interpreter importing them again (measured on a 2-core CPU: about 4 CPU-s a worker, 0.05 s a fork).

    python -m parity_capture.forkserver --socket PATH --lock PATH [--keep-idle SECONDS]

Its key is the pool key (the whole environment, the interpreter, the working dir, parity's
sources), so what torch read from the environment at its import is what a fresh worker would have
read. It listens before its own preparation (dynamo, Inductor, the first compile's set-up; a client's
request waits in the socket's queue meanwhile), though after the package's imports, torch among
them (`python -m` imports parity_capture's __init__ first: about 0.8 s on a 2-core CPU); it takes
one request per connection, a JSON line {"argv": worker.py's arguments, "env": {...}, "cwd": ...,
"log": PATH}, and answers {"pid": N} from the worker itself: a process of its own session, no
child of the server's (forked twice), its stdout and stderr in the log. A worker whose client is
gone before the answer ends at once. A server that cannot serve (its imports initialised CUDA,
or failed) writes why to `<base>.refused`; parity then no longer asks that key's server.

The key leaves out what a worker can take after its fork (runtime/worker_pool.cpp, LeftToTheFork):
a request's PYTHONPATH is adopted in the fork (its entries in sys.path where Python puts them),
unless an entry it adds holds a module the server has imported (it would be shadowed) or an
installed distribution (its entry points were read here), or an entry it drops holds a module
imported from there: such a request is answered {"refused": why} and parity starts that worker
itself. A slot's thread counts (OMP_NUM_THREADS and MKL_NUM_THREADS set alike) are set in the
fork (torch.set_num_threads); the server imports with one thread and runs no parallel region, so a
fork may start a team of any size (a fork of a process that ran an OpenMP team hangs in its next
team of that size).

A request with {"run": NAME} (one of RUNS: a real replay's rank, distributed/real.h; a profile's
child, profile/profile.h; `parity import`'s child, cli/cmd_import.cpp) forks that module's main(argv) instead, watched by a supervisor (a fork too, the run's parent) that answers
{"pid": N}, then, when the run ends, {"exit": CODE} or {"signal": N}; the connection is the run's
lifeline: when the client's end closes first, the supervisor kills the run's process group. One server per key: the lock (flock, the server's pid inside)
says which; a second one started meanwhile exits. It ends after SECONDS without a request, and
never initialises CUDA (a fork of a process that did could not use it): a worker warms its device
after the fork (worker.py --warm)."""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import socket
import sys
import time
import traceback

# One request line at most this long (an environment is a few KiB).
_MAX_REQUEST = 1 << 20

# What a {"run": ...} request may name: the run's module (`python -m parity_capture.<run>`), whose
# main(argv) returns an exit code; imported before the server serves, as the worker is.
RUNS = {"rank_replay": "rank_replay", "profiling": "profiling.__main__", "import_repro": "import_repro"}


def threads_per_request(env) -> int:
    """The thread count a fork sets for itself (0: none, the server's is the request's): where
    OMP_NUM_THREADS and MKL_NUM_THREADS are set alike to a count, as parity sets each job slot's
    (runtime/jobs.cpp). The same rule as the key's in runtime/worker_pool.cpp."""
    omp, mkl = env.get("OMP_NUM_THREADS", ""), env.get("MKL_NUM_THREADS", "")
    return int(omp) if omp == mkl and omp.isdigit() and int(omp) > 0 else 0


def pythonpath_entries(value, cwd: str) -> list:
    """The sys.path entries Python makes of a PYTHONPATH at start in `cwd`: each made absolute
    (an empty one is the working dir), the first of duplicates kept."""
    out = []
    for part in value.split(os.pathsep) if value else []:
        entry = os.path.normpath(os.path.join(cwd, part)) if part else cwd
        if entry not in out:
            out.append(entry)
    return out


def _top_level_modules() -> dict:
    """Each imported top-level module's name -> the file it came from ('' if none)."""
    return {name: getattr(m, "__file__", None) or "" for name, m in list(sys.modules.items()) if "." not in name and m is not None}


def _shadowed(entry: str, loaded: dict) -> str:
    """What dir `entry` holds that a fresh interpreter would see and this server cannot show its
    fork ('' if nothing): a module or package named like one of `loaded` (it would be shadowed),
    or an installed distribution (its entry points, dynamo's backends among them, were read
    here already)."""
    try:
        names = os.listdir(entry)
    except OSError:
        return ""
    for n in sorted(names):
        stem = n.split(".", 1)[0]
        if stem in loaded and (n == stem or n.endswith((".py", ".pyc", ".so"))):
            return f"{stem}, which the server imported from elsewhere"
        if n.endswith((".dist-info", ".egg-info")):
            return f"the distribution {n}, whose entry points the server read without it"
    return ""


def refusal(server_pythonpath, server_cwd: str, req: dict) -> str:
    """Why a fork of this server cannot serve `req` as a fresh interpreter started with the
    request's environment would ('' when it can): its PYTHONPATH adds an entry holding a module
    of one already imported here, or drops one a module imported here came from."""
    env = req.get("env") if isinstance(req.get("env"), dict) else {}
    have = pythonpath_entries(server_pythonpath, server_cwd)
    want = pythonpath_entries(env.get("PYTHONPATH"), str(req.get("cwd") or server_cwd))
    if have == want:
        return ""
    loaded = _top_level_modules()
    for entry in want:
        if entry not in have and (what := _shadowed(entry, loaded)):
            return f"PYTHONPATH entry {entry} holds {what}"
    for entry in have:
        if entry not in want:
            for name, path in loaded.items():
                if path.startswith(entry + os.sep) and path[len(entry) + 1:].split(os.sep)[0].split(".")[0] == name:
                    return f"the server imported {name} from PYTHONPATH entry {entry}, which the request does not have"
    return ""


# Inductor's compile threads: read once as its config is imported, decided again in a fork
# whose environment sets them otherwise (runtime/worker_pool.cpp leaves them out of the key).
COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"


def _adopt(server_pythonpath, server_cwd: str, env: dict, cwd: str, server_compile_threads=None) -> None:
    """In a fork: sys.path with the request's PYTHONPATH entries where the server's were (after
    the script's entry), the request's thread count (refusal() said both can be taken) and its
    compile threads. Its CUDA_VISIBLE_DEVICES needs nothing: CUDA, which reads it, starts in the
    fork."""
    have = pythonpath_entries(server_pythonpath, server_cwd)
    want = pythonpath_entries(env.get("PYTHONPATH"), cwd)
    if have != want:
        rest = [p for p in sys.path[1:] if p not in have and p not in want]
        sys.path[:] = sys.path[:1] + want + rest
        import importlib
        importlib.invalidate_caches()
    if n := threads_per_request(env):
        import torch
        torch.set_num_threads(n)
    if env.get(COMPILE_THREADS) != server_compile_threads and "torch._inductor.config" in sys.modules:
        from torch._inductor import config
        config.compile_threads = config.decide_compile_threads()


def _prepare() -> None:
    """What every worker of this key imports before it listens, and its first compile's set-up
    (warm.first_compile_paid): the costly part of its start. CUDA
    stays untouched: Inductor asks torch.cuda.is_available() at import, which through the CUDA
    runtime marks every later fork as one that cannot use CUDA ("Cannot re-initialize CUDA in
    forked subprocess", measured on an H200 with torch 2.11), so the imports ask NVML instead
    (PYTORCH_NVML_BASED_CUDA_CHECK, for the imports only: a worker gets its own environment back).
    A fork is then tried, and a server whose forks could not use CUDA refuses to serve."""
    import importlib
    import warnings
    warnings.filterwarnings("ignore")
    if threads_per_request(os.environ):  # each fork sets its own (_adopt): none started here
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    nvml_set = "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ
    if nvml_set:
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        for module in ("torch", "torch._dynamo", "torch._inductor.compile_fx", f"{__package__}.worker",
                       *(f"{__package__}.{module}" for module in RUNS.values())):
            importlib.import_module(module)
        from .warm import first_compile_paid
        first_compile_paid()
    finally:
        if nvml_set:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
    import torch
    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised while importing; workers cannot be forked from here")
    bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    if bad_fork is not None:
        pid = os.fork()
        if pid == 0:
            os._exit(3 if bad_fork() else 0)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("a fork of this process could not use CUDA (an import asked the CUDA runtime)")


def _read_request(conn: socket.socket) -> dict:
    conn.settimeout(10)
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk or len(buf) > _MAX_REQUEST:
            raise ValueError("no request line")
        buf += chunk
    req = json.loads(buf)
    if not isinstance(req, dict) or not isinstance(req.get("argv"), list) or not isinstance(req.get("log"), str):
        raise ValueError("a request is {\"argv\": [...], \"log\": PATH, \"env\": {...}, \"cwd\": PATH}")
    if req.get("run") is not None and req["run"] not in RUNS:
        raise ValueError(f"\"run\" is one of {list(RUNS)}, not {req['run']!r}")
    return req


def _enter_process(req: dict, keep_fds: set) -> None:
    """In a forked process that runs a request: a session of its own, the request's log as its
    stdout and stderr, its environment and working dir; none of the server's files."""
    os.setsid()
    for fd in keep_fds:
        os.close(fd)
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    server_pythonpath, server_cwd, server_threads = os.environ.get("PYTHONPATH"), os.getcwd(), os.environ.get(COMPILE_THREADS)
    env = req.get("env")
    if isinstance(env, dict):
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        if req.get("cwd"):
            os.chdir(req["cwd"])
        _adopt(server_pythonpath, server_cwd, os.environ, os.getcwd(), server_threads)
    elif req.get("cwd"):
        os.chdir(req["cwd"])


def _answer(conn: socket.socket, message: dict) -> bool:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
        return True
    except OSError:
        return False


def _become_worker(conn: socket.socket, req: dict, keep_fds: set) -> int:
    """In the forked grandchild: the worker's process (_enter_process), the answer, then worker.py's
    main."""
    _enter_process(req, keep_fds)
    if not _answer(conn, {"pid": os.getpid()}):
        return 0  # the client is gone: nobody would use this worker
    conn.close()
    from . import worker
    return worker.main([str(a) for a in req["argv"]])


def _run_main(req: dict) -> int:
    """The run's process: its module's main, its exit code (1 with the traceback in its log when
    main raised)."""
    import importlib
    try:
        return int(importlib.import_module(f"{__package__}.{RUNS[req['run']]}").main([str(a) for a in req["argv"]]) or 0)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 (reported in the run's log)
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _supervise(conn: socket.socket, req: dict, keep_fds: set) -> int:
    """In the supervisor (a child of the server's): forks the run, answers its pid, and waits for
    whichever comes first: the run's end (answered {"exit"} or {"signal"}) or the client's end of
    the connection closing (the run's process group killed)."""
    for fd in keep_fds:
        os.close(fd)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _enter_process(req, set())
        os._exit(_run_main(req))
    watch = [conn] if _answer(conn, {"pid": pid}) else []
    if not watch:
        _kill_group(pid)
    while True:
        ready, _, _ = select.select(watch, [], [], 0.05)
        if ready and not conn.recv(1):  # the client is gone (ended, or killed the run): nobody waits for it
            _kill_group(pid)
            watch = []
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            break
    _answer(conn, {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.waitstatus_to_exitcode(status)})
    return 0


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _fork_run(conn: socket.socket, req: dict, keep_fds: set) -> None:
    """A {"run"} request: its supervisor forked, left to end on its own (reaped by serve())."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        code = 1
        try:
            code = _supervise(conn, req, keep_fds)
        except BaseException:  # noqa: BLE001 (in the server's log)
            traceback.print_exc()
        finally:
            os._exit(code)


def _fork_worker(conn: socket.socket, req: dict, keep_fds: set) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if os.fork() == 0:  # the worker: no child of the server's, so the server reaps nothing later
                try:
                    code = _become_worker(conn, req, keep_fds)
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else 1
                except BaseException:  # noqa: BLE001 (reported in the worker's log)
                    traceback.print_exc()
            else:
                code = 0
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.waitpid(pid, 0)


def _reap_supervisors() -> None:
    """The supervisors of runs that ended (the server's only children that outlive a request)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def serve(listener: socket.socket, keep_idle: float, keep_fds: set) -> None:
    """Serves requests until `keep_idle` seconds pass without one (0: until none is waiting, so a
    server started for a run that keeps no workers serves that run's request and ends)."""
    last = time.monotonic()
    while True:
        ready, _, _ = select.select([listener], [], [], max(0.0, keep_idle - (time.monotonic() - last)))
        _reap_supervisors()
        if not ready:
            return
        conn, _ = listener.accept()
        last = time.monotonic()
        try:
            req = _read_request(conn)
            conn.settimeout(None)
            why = refusal(os.environ.get("PYTHONPATH"), os.getcwd(), req)
            if why:  # parity starts this one itself
                print(f"parity fork server: request refused: {why}", file=sys.stderr, flush=True)
                _answer(conn, {"refused": why})
                continue
            (_fork_run if req.get("run") else _fork_worker)(conn, req, keep_fds)
        except (OSError, ValueError) as e:
            print(f"parity fork server: request refused: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            conn.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--lock", required=True)
    ap.add_argument("--keep-idle", type=float, default=0.0)
    a = ap.parse_args(argv)
    lock = os.open(a.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server of this key is up
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    try:
        os.unlink(a.socket)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(a.socket)
    listener.listen(64)
    try:
        try:
            _prepare()
        except Exception as e:
            # This key's server cannot serve (its imports initialised CUDA, or failed): said once,
            # so its clients start their workers themselves without asking it again.
            with open(a.lock[:-len(".lock")] + ".refused" if a.lock.endswith(".lock") else a.lock + ".refused", "w") as f:
                f.write(f"{type(e).__name__}: {e}\n")
            raise
        serve(listener, a.keep_idle, {listener.fileno(), lock})
    except Exception:  # noqa: BLE001 (its clients fall back to starting workers themselves)
        traceback.print_exc()
        return 1
    finally:
        listener.close()
        try:
            os.unlink(a.socket)  # ours: the lock is held until this process ends
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    from .ending import end
    end(main())
