"""The persistent Python worker parity drives: torch is imported once; requests arrive as JSON
lines over a Unix socket, one connection at a time, each answered by one JSON line.

    python -m parity_capture.worker --socket PATH [--keep-idle SECONDS --pool-lock LOCK] [--warm cpu|cuda]

With --pool-lock the worker is a pool entry's (runtime/worker_pool.h): it outlives the parity
process that started it, serving whichever parity process holds LOCK (flock), and ends once no
process has held LOCK for SECONDS, or as soon as none holds it after it imported a repro dir's
host-op modules beyond its own --import (import_modules: state the next user did not approve).

Protocol (docs/worker.md). Every request has "cmd" and an "id" echoed back; every answer has
"ok". A host op plan repeat may come as an 8-byte frame instead (FRAME below). Failures answer
{"ok": false, "error_type": ..., "error": ..., "traceback": ...} and the worker goes on. Tensors
travel as safetensors files named in the request ("out"), a host op's through shared memory.
  ping                 -> torch_version, cuda
  list_models          -> models: [{name, suite, batch_size, description}]
  list_backends        -> backends: dynamo backends registered in this torch
  capture              model, out, mode, batch_size, device, dtype -> out
  import_modules       modules -> {} (imports what registers a repro's host ops; parity approved them)
At start the worker imports the modules of parity's --import (PARITY_IMPORT); while one failed to
import, every request answers ImportError naming it.
  host_call            op, args, shm, tensors[, plan] | plan -> returns, kind, counts, shm, outputs | same
                       (one host op; tensors in shared memory segments, shm.py; a plan repeats a call and
                       its results may go where its previous ones went: {"same": true}, see _host_run)
  host_batch           calls [{op, args}], shm, tensors[, plan] | plan -> counts, shm, outputs | same (consecutive
                       host op calls; an argument {"result": [call, output]} is an earlier call's result)
  host_backward        op, args, grads, diff, shm, tensors -> returns, shm, outputs (its vector-Jacobian product)
  compiler_bisect      repro, graph, backend, options, mode, device, seed, sgd_lr, tol, equal_nan,
                       ignore_non_fp, signature -> bisected, why, runs, seconds, result (compiler_bisect.py)
  shutdown
and the Python side of the backends (backends/, each module named like its C++ file):
  run                  repro, graph, backend, options, mode, device, iterations, seed, sgd_lr, out[, keep]
                       -> names, compile_time_s, run_times_s, peak_memory_bytes   (backend run in this process;
                       with keep, the compiled graph is kept for one time_runs)
  time_runs            iterations -> run_times_s (timed calls of what the last run with keep compiled)
  aot_graphs           repro, graph, backend (aot_eager | aot_eager_decomp_partition), out
                       -> out (a repro dir holding the AOTAutograd inference graph)
  aot_inductor         repro, graph, device, options, out -> package (.pt2), compile_time_s
  torchscript          repro, graph, device, out -> path (.pt)
  export_pt2           repro, graph, device, out -> path (.pt2)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import traceback
from typing import Any, Dict

import torch

from . import compiler_bisect, host_ops, shm, warm
from .backends import aot_inductor, nativert, python_backends, torchscript


def cmd_capture(req) -> Dict[str, Any]:
    from . import models
    from .capture import capture
    spec, model, args, kwargs = models.build(req["model"], req.get("batch_size"))
    device = req.get("device", "cpu")
    dtype = getattr(torch, req["dtype"]) if req.get("dtype") not in (None, "float32", "amp") else None
    model = model.to(device=device, dtype=dtype) if dtype else model.to(device)

    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(device, dtype) if dtype and x.is_floating_point() else x.to(device)
    args = tuple(torch.utils._pytree.tree_map(move, list(args)))
    kwargs = torch.utils._pytree.tree_map(move, kwargs)
    # AMP as PyTorch's benchmarks run it: float16 autocast on CUDA, bfloat16 on the CPU.
    amp = None
    if req.get("dtype") == "amp":
        amp = torch.float16 if str(device).startswith("cuda") else torch.bfloat16
    capture(model, args, req["out"], mode=req.get("mode", "eval"), name=spec.name, example_kwargs=kwargs,
            loss_fn=spec.loss if req.get("mode") == "train" else None, autocast=amp,
            extra_manifest={"suite": spec.suite, "batch_size": req.get("batch_size") or spec.batch_size})
    return {"out": req["out"]}


def cmd_list_models(req) -> Dict[str, Any]:
    from . import models
    return {"models": [{"name": n, "suite": s.suite, "batch_size": s.batch_size, "description": s.description,
                        "imports": list(s.imports)} for n, s in models.MODELS.items()]}


def cmd_list_backends(req) -> Dict[str, Any]:
    import torch._dynamo
    return {"backends": sorted(torch._dynamo.list_backends(exclude_tags=()))}


def cmd_import_modules(req) -> Dict[str, Any]:
    """Imports the modules that register a repro's host ops (parity approved them). Only a module
    beyond the worker's own `--import` (imported at its start, and part of its pool key, so every
    later user of a pool entry names it too) taints the worker."""
    from .host_ops import import_modules, started_with
    global _TAINTED
    modules = req.get("modules", [])
    _TAINTED = _TAINTED or bool(set(modules) - set(started_with()))
    failed = import_modules(modules)
    if failed:
        m, err = next(iter(failed.items()))
        raise ImportError(f"cannot import {m}: {err}")
    return {}


# Host call plans of the connected client: {plan id: host_ops.Prepared}. A request with "op" (or
# "calls") is whole and defines its "plan" when it names one; a request with only "plan" repeats
# that call on the segment's current contents (the arguments are views into it). At most
# _MAX_PLANS are kept (a plan holds views of parity's segments and copies on devices): the oldest
# goes, and a repeat of it answers UnknownPlan, which makes parity send it whole again.
_PLANS: Dict[int, Any] = {}
_MAX_PLANS = 512


class UnknownPlan(LookupError):
    pass


# torch.inference_mode() without its Python wrapper (a third of a small host op call's cost in
# the worker); the public one where torch has no _InferenceMode.
_C_INFERENCE_MODE = getattr(torch._C, "_InferenceMode", None)


def _inference_mode():
    return _C_INFERENCE_MODE(True) if _C_INFERENCE_MODE is not None else torch.inference_mode()


def _host_run(req, whole_key: str, prepare) -> Dict[str, Any]:
    """A host_call or host_batch: prepared from a whole request (kept as its plan when it names
    one) or found by its plan id, then run (_run_prepared)."""
    plan = req.get("plan")
    if whole_key not in req:
        return _run_prepared(_plan(plan), True)
    prepared = prepare(req)
    if plan is not None:
        while len(_PLANS) >= _MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[plan] = prepared
    return _run_prepared(prepared, False)


def _plan(plan) -> Any:
    prepared = _PLANS.get(plan)
    if prepared is None:
        raise UnknownPlan(f"host call plan {plan} is unknown to this worker")
    return prepared


def _run_prepared(prepared, repeat: bool) -> Dict[str, Any]:
    """Runs in inference mode (parity's own autograd asks for gradients: host_backward); the
    results go into the worker's segment, where the plan's previous results went when they fit
    the same places ({"same": true})."""
    with _inference_mode():
        outs, counts = prepared.run(repeat)
    answer, prepared.places = shm.write_results(outs, prepared.places if repeat else None)
    if answer.get("same"):
        return answer
    return {"returns": len(outs), "kind": prepared.kind, "counts": counts, **answer}


def cmd_host_call(req) -> Dict[str, Any]:
    """One host op: arguments from JSON and parity's shared-memory segment, results into the
    worker's (shm.py)."""
    return _host_run(req, "op", lambda r: host_ops.prepare_batch([r], shm.read_arguments(r)))


def cmd_host_batch(req) -> Dict[str, Any]:
    """A run of consecutive host op calls in one request (parity's interpreter batches them when
    it runs without autograd): "calls" [{op, args}], an argument {"result": [call, output]} an
    earlier call's result, which stays here. Plans as for host_call."""
    return _host_run(req, "calls", lambda r: host_ops.prepare_batch(r["calls"], shm.read_arguments(r)))


def cmd_host_backward(req) -> Dict[str, Any]:
    """The backward of one host op call (parity's C++ autograd asks for it)."""
    grads = host_ops.backward(req["op"], req["args"], req["grads"], req["diff"], shm.read_arguments(req))
    return {"returns": len(grads), **shm.write_results(grads)[0]}


def cmd_ping(req) -> Dict[str, Any]:
    cuda = torch.cuda.is_available()
    out = {"torch_version": torch.__version__, "git_version": torch.version.git_version, "cuda": cuda, "pid": os.getpid(),
           "device_name": torch.cuda.get_device_name(0) if cuda else "cpu", "python": sys.executable}
    if _TORCH_MISMATCH:
        out["torch_mismatch"] = _TORCH_MISMATCH
    return out


def torch_mismatch() -> str:
    """Why this worker's torch is not the build parity was built against ($PARITY_TORCH_BUILT,
    "<version> <git hash>"), or "": parity's interpreter (the eager and fp64 reference) and the
    worker (the backend) must run the same torch, else a verdict compares two builds."""
    built = os.environ.get("PARITY_TORCH_BUILT", "")
    mine = f"{torch.__version__} {torch.version.git_version}"
    if not built or built == mine:
        return ""
    return (f"the Python worker's torch ({mine}, {sys.executable}) is not the build parity was built against ({built}): "
            f"rebuild parity against this Python's torch (`{sys.executable} -m pip install --no-build-isolation <parity>`, "
            f"or ./setup.sh with PARITY_ENV_PYTHON={sys.executable}: docs/setup.md) "
            f"or point PARITY_PYTHON at the Python parity was built with")


_TORCH_MISMATCH = torch_mismatch()


# The request table: one line per request, a backend's Python side one line here.
COMMANDS = {"ping": cmd_ping, "list_models": cmd_list_models, "list_backends": cmd_list_backends,
            "capture": cmd_capture, "import_modules": cmd_import_modules,
            "host_call": cmd_host_call, "host_batch": cmd_host_batch, "host_backward": cmd_host_backward,
            "run": python_backends.run, "time_runs": python_backends.time_runs, "aot_graphs": python_backends.aot_graphs,
            "compiler_bisect": lambda req: _tainting(compiler_bisect.compiler_bisect, req),
            "aot_inductor": aot_inductor.aot_inductor, "torchscript": torchscript.torchscript,
            "export_pt2": nativert.export_pt2}


# Modules of --import (PARITY_IMPORT) that failed to import at start: every request but shutdown
# answers with the failure (parity checks with a ping before it runs anything).
_IMPORT_ERRORS: Dict[str, str] = {}


def handle(req: Dict[str, Any]) -> Dict[str, Any]:
    cmd = req.get("cmd")
    if cmd not in COMMANDS:
        return {"ok": False, "error_type": "BadRequest", "error": f"unknown cmd {cmd!r}"}
    if _TORCH_MISMATCH and cmd != "ping":
        return {"ok": False, "error_type": "TorchMismatch", "error": _TORCH_MISMATCH}
    if _IMPORT_ERRORS:
        m, err = next(iter(_IMPORT_ERRORS.items()))
        return {"ok": False, "error_type": "ImportError", "error": f"--import {m}: cannot import it: {err}"}
    try:
        out = COMMANDS[cmd](req)
        out["ok"] = True
        return out
    except Exception as e:  # reported to parity, the worker lives on
        return _failure(e)


def _failure(e: Exception) -> Dict[str, Any]:
    return {"ok": False, "error_type": type(e).__name__, "error": str(e).strip()[:4000],
            "traceback": traceback.format_exc()[-8000:]}


# A plan repeat as a frame instead of a JSON line (runtime/worker.cpp): the magic byte, three zero
# bytes, the plan id (little-endian uint32). Its answer is the same 8 bytes with a zero id when
# the results went where they went last time ({"same": true}), else a JSON line as for any request.
FRAME = struct.Struct("<c3xI")
FRAME_MAGIC = b"\x01"
SAME_FRAME = FRAME.pack(FRAME_MAGIC, 0)


def _repeat(frame: bytes) -> bytes:
    """A plan repeat from its frame, straight to its plan (no request dict, no dispatch)."""
    _, plan = FRAME.unpack(frame)
    try:
        resp = _run_prepared(_plan(plan), True)
    except Exception as e:  # reported to parity, the worker lives on
        resp = _failure(e)
    else:
        if resp.get("same"):
            return SAME_FRAME
        resp["ok"] = True
    return (json.dumps(resp) + "\n").encode()


# Set once the worker imported modules a client named (import_modules) or ran a compiler bisection
# (compiler_bisect: the bisector's class-level state and the subsystems it held back are Inductor's
# globals): a pool entry's worker then ends as soon as no parity process holds it, never adopted by
# a later run that would compile with what they left behind.
_TAINTED = False


def _tainting(command, req) -> Dict[str, Any]:
    global _TAINTED
    _TAINTED = True
    return command(req)


class _Pool:
    """A pool entry's side of the worker: when to end. `lock` is the entry's lock file, held (flock)
    by the parity process using the entry; `keep_idle` the seconds the worker stays once none does."""

    POLL_S = 1.0  # how often an idle worker looks whether its entry is free

    def __init__(self, lock: str, keep_idle: float, sock_path: str):
        import time
        self.lock, self.keep_idle, self.sock_path = lock, keep_idle, sock_path
        self.clock = time.monotonic
        self.free_since = None  # when the entry was first seen free, since the last connection

    def should_end(self) -> bool:
        """True when the entry has been free for keep_idle seconds (at once when tainted); then
        this worker holds the entry's lock and its socket is gone, so no process adopts it."""
        import fcntl
        try:
            fd = os.open(self.lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return True  # the entry was removed (parity workers --stop)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self.free_since = None  # a parity process holds it
            return False
        if self.free_since is None:
            self.free_since = self.clock()
        if _TAINTED or self.clock() - self.free_since >= self.keep_idle:
            try:
                os.unlink(self.sock_path)
            except OSError:
                pass
            self.held = fd  # kept until the process exits, which releases the lock
            return True
        os.close(fd)
        return False


def serve(sock_path: str, pool: "_Pool | None" = None) -> None:
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path + ".tmp")
    srv.listen(1)
    os.replace(sock_path + ".tmp", sock_path)  # the socket appears only once it listens
    if pool:
        srv.settimeout(pool.POLL_S)
    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            if pool.should_end():
                return
            continue
        conn.settimeout(None)
        if pool:
            pool.free_since = None
        _PLANS.clear()  # plans belong to one client
        if _serve_client(conn):
            return
        if pool and _TAINTED and pool.should_end():
            return


def _serve_client(conn: socket.socket) -> bool:
    """One client's requests until it goes; True when it asked the worker to shut down. A client
    that dies while its request runs (its process crashed: the driver then judges that job alone)
    ends only its connection: the answer nobody reads is dropped and the worker serves the next."""
    try:
        with conn, conn.makefile("rb") as r, conn.makefile("wb") as w:
            while True:
                head = r.peek(1)[:1]
                if not head:
                    return False  # the client is gone
                if head == FRAME_MAGIC:
                    w.write(_repeat(r.read(FRAME.size)))
                    w.flush()
                    continue
                req = json.loads(r.readline())
                if req.get("cmd") == "shutdown":
                    w.write(b'{"ok": true}\n')
                    w.flush()
                    return True
                resp = handle(req)
                resp["id"] = req.get("id")
                w.write((json.dumps(resp) + "\n").encode())
                w.flush()
    except (BrokenPipeError, ConnectionResetError):
        return False


def deterministic_setup() -> None:
    """The accuracy-check settings parity's C++ eager reference uses too (experiment/experiment.cpp):
    both sides must compute under the same rules (TF32 left on for cuDNN would make compiled
    convolutions differ from the reference); random ops in Inductor fall back to eager's."""
    from .standalone import deterministic_setup as common
    from .standalone import inductor_settings
    common()
    import torch._inductor.config as cfg
    for key, value in inductor_settings({}).items():  # also for backends that compile with Inductor inside
        setattr(cfg, key, value)


def tune_malloc() -> None:
    """A host op call's results are fresh tensors, freed once copied out: glibc serves blocks of up
    to 32 MB from its heap here and keeps up to 64 MB free at the heap's top, so a call in a loop
    reuses the same pages instead of mmap, page faults and munmap per call (measured: ~0.4 ms of a
    4 MB call). glibc's own dynamic threshold can reach 32 MB too, but trims return the pages the
    next call faults in again. Nothing where the C library is not glibc."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
    mallopt(M_MMAP_THRESHOLD, 32 << 20)
    mallopt(M_TRIM_THRESHOLD, 64 << 20)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--keep-idle", type=float, default=0.0)
    ap.add_argument("--pool-lock")
    ap.add_argument("--warm", help="cpu | cuda: prepare a dynamo backend's first compile there before listening")
    a = ap.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore")
    tune_malloc()
    deterministic_setup()
    warm.isa_probes()
    _IMPORT_ERRORS.update(host_ops.import_plugins())  # after the settings: a plugin may set its own
    if a.warm and not _TORCH_MISMATCH and not _IMPORT_ERRORS:
        # Before the socket appears: a slot takes jobs once its worker is warm. A worker that will
        # refuse every job (another torch build, an --import that failed) says so at once instead.
        warm.warm_up(a.warm)
    serve(a.socket, _Pool(a.pool_lock, a.keep_idle, a.socket) if a.pool_lock else None)
    return 0


if __name__ == "__main__":
    from .ending import end
    end(main())
