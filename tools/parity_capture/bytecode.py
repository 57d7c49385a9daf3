"""Runs one of parity_capture's modules as `python -m` would, after making sure the bytecode of what
it imports is in parity's bytecode cache, compiled on every core at once.

    python bytecode.py parity_capture.MODULE [ARGS...]        (run as a file: imports no torch)

parity starts its Python processes this way only where it keeps their bytecode itself
(runtime/python_env.h: torch installed without bytecode, and Python not allowed to write it
beside the sources, so PYTHONPYCACHEPREFIX names parity's cache). There the first process would
compile torch, dynamo, Inductor and what they import from source as it imports them, one module
after another: 21.4 s on an H200 machine's 16 cores, against 5.8 s once compiled. Here the
packages they come from are compiled first with a process per core (4.5 s there, the import after
it 6.6 s), once: a marker in the cache records the torch it was made for, and a lock makes the
processes started side by side (a slot's worker each) wait for the one compiling. With fewer than
MIN_CORES cores, or with the marker in place, nothing is compiled here and the imports compile
what they need as before. Compiling never decides anything: a failure is logged and the module
runs anyway."""
from __future__ import annotations

import compileall
import importlib.util
import os
import re
import runpy
import sys

# The packages a worker's imports come from (torch, dynamo and Inductor, and what they import).
PACKAGES = ("torch", "sympy", "mpmath", "networkx", "triton", "jinja2", "markupsafe", "numpy", "filelock", "fsspec",
            "packaging", "optree", "yaml")
# Parts of them no parity process imports.
SKIPPED = re.compile(r"[/\\](tests?|testing|onnx|include|share|benchmarks?)[/\\]")
MIN_CORES = 4


def marker_path(prefix: str) -> str:
    return os.path.join(prefix, f"parity-compiled-{sys.implementation.cache_tag}")


def torch_stamp() -> str:
    """What the marker records: torch's package dir and its __init__.py's size and mtime (another
    torch, or this one reinstalled, compiles again)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    st = os.stat(spec.origin)
    return f"{spec.origin} {st.st_size} {st.st_mtime_ns}\n"


def compile_packages(names=PACKAGES, workers: int = 0) -> None:
    """Compiles every module of the packages `names` into this interpreter's bytecode cache
    (sys.pycache_prefix), `workers` processes at once (0: one per core)."""
    for name in names:
        spec = importlib.util.find_spec(name)
        for d in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(d, quiet=2, workers=workers or os.cpu_count() or 1, rx=SKIPPED)


def ensure_compiled(cores: int, names=PACKAGES) -> bool:
    """Compiles the packages `names` once per torch into the cache PYTHONPYCACHEPREFIX names,
    unless this machine has fewer than MIN_CORES cores. True when this call compiled them; a
    failure (a cache it cannot write, a compile that raised) is logged and answers False."""
    prefix = sys.pycache_prefix
    if not prefix or cores < MIN_CORES:
        return False
    try:
        return _compile_once(prefix, cores, names)
    except Exception as e:  # noqa: BLE001 (the imports compile what they need instead)
        print(f"parity: compiling the bytecode cache failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return False


def _compile_once(prefix: str, cores: int, names) -> bool:
    stamp = torch_stamp()
    marker = marker_path(prefix)

    def current() -> bool:
        try:
            with open(marker) as f:
                return f.read() == stamp
        except OSError:
            return False

    if current():
        return False
    import fcntl
    os.makedirs(prefix, exist_ok=True)
    with open(os.path.join(prefix, "parity-compiling.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process compiling: its result is ours
        if current():
            return False
        compile_packages(names, workers=cores)
        tmp = f"{marker}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(stamp)
        os.replace(tmp, marker)
    return True


def main(argv) -> None:
    """argv: [this script, MODULE, ARGS...]; runs MODULE's main as `python -m MODULE ARGS...`."""
    module = argv[1]
    ensure_compiled(os.cpu_count() or 1)
    # As `python -m` starts: the working dir first on sys.path instead of this script's dir (whose
    # modules would shadow top-level ones of the same name), the module's file as argv[0].
    here = os.path.dirname(os.path.realpath(__file__))  # Python puts the script's real dir there
    if sys.path and os.path.realpath(sys.path[0]) == here:
        sys.path[0] = os.getcwd()
    sys.argv = argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
