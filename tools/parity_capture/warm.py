"""What a process that compiles with Inductor prepares before its first compile (the worker at its
start, the profiling child before it compiles with the graph caches off): the imports, the CPU's vector
ISA (its probes built side by side, and remembered across processes), CUDA's context and the
compile pool."""
from __future__ import annotations

import importlib
import os
import platform
import sys
from concurrent.futures import ThreadPoolExecutor

import torch


def remember_isa_probes() -> None:
    """Inductor picks the vector ISA of its CPU kernels by building a probe library per ISA (kept
    in its cache) and dlopen-ing each in a fresh Python process, so that an illegal instruction
    cannot take the compiler down: about 1 s of every worker's first CPU compile (measured on a
    2-core CPU). A library that loaded once loads again: the worker marks each one that did
    (beside it, keyed by its size and mtime) and asks a process only of one not seen loading.
    Where this torch has no such probe, nothing changes."""
    try:
        from torch._inductor.cpu_vec_isa import VecISA
    except ImportError:
        return
    probe = getattr(VecISA, "_probe_load", None)
    if probe is None or getattr(probe, "parity_remembers", False):
        return

    def remembered(self, output_path: str) -> bool:
        try:
            st = os.stat(output_path)
        except OSError:
            return probe(self, output_path)
        marker = f"{output_path}.parity-loads-{st.st_size}-{st.st_mtime_ns}"
        if os.path.exists(marker):
            return True
        ok = probe(self, output_path)
        if ok:  # a failure (or a hung probe) is asked again next time
            try:
                open(marker, "w").close()
            except OSError:
                pass
        return ok

    remembered.parity_remembers = True
    VecISA._probe_load = remembered


def probe_isas_side_by_side() -> None:
    """Inductor lists the CPU's vector ISAs once a process (valid_vec_isa_list, at its first CPU
    compile) by asking each ISA the CPU claims whether a probe library built with its flags loads,
    one ISA after another: on an empty cache a compiler run each, about 5 s of a 2-core CPU (avx512
    with vnni 2.1 s, avx512 1.7 s, avx2 1.4 s: measured with torch 2.13), in every cold worker's
    start. Here the list's first call asks those ISAs first, a thread each: the builds are compiler
    processes and run side by side, and each answer is kept where the list asks it next
    (VecISA.__bool__ is cached), so the list is still Inductor's own. Only on x86 Linux, where the
    list asks several; a torch without these names is left as it is, and a probe that raises here is
    left to the list, which meets it again."""
    try:
        from torch._inductor import cpu_vec_isa
        listed = cpu_vec_isa.valid_vec_isa_list
    except (ImportError, AttributeError):
        return
    if getattr(listed, "parity_side_by_side", False) or sys.platform != "linux" or platform.machine() != "x86_64":
        return
    asked = []

    def answer(isa) -> None:
        try:
            bool(isa)
        except Exception:  # noqa: BLE001 (the list asks it again and meets it)
            pass

    def side_by_side():
        if not asked:
            asked.append(True)
            try:
                flags = cpu_vec_isa.x86_isa_checker()
                todo = [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(isa).split())]
            except Exception:  # noqa: BLE001 (the list asks it again and meets it)
                todo = []
            if len(todo) > 1:
                with ThreadPoolExecutor(len(todo)) as pool:
                    list(pool.map(answer, todo))
        return listed()

    def cache_clear() -> None:  # what Inductor's own tests call: the next list asks again
        asked.clear()
        listed.cache_clear()

    side_by_side.parity_side_by_side = True
    side_by_side.__wrapped__ = listed
    side_by_side.cache_clear, side_by_side.cache_info = cache_clear, listed.cache_info
    cpu_vec_isa.valid_vec_isa_list = side_by_side


def isa_probes() -> None:
    """Both of what this module does to Inductor's ISA probes: each ISA's probe built side by side
    with the others (probe_isas_side_by_side) and a probe that loaded once not loaded again in a
    process of its own (remember_isa_probes)."""
    remember_isa_probes()
    probe_isas_side_by_side()


def warm_up(device: str) -> None:
    """What a dynamo backend's first compile on `device` would otherwise do inside the first
    request (--warm; measured on a 2-core CPU: 1.9 s of imports and 1.2 s choosing the vector ISA,
    of the 3.1 s a first cached compile costs): dynamo and Inductor imported; on the CPU the
    vector ISA Inductor's kernels are built for (it compiles and loads probes) and, in a thread
    beside the imports, their precompiled header (cpu_kernel_header); on CUDA the
    device's context and properties and Inductor's compile subprocess pool started. No backend
    runs: a faulty backend fails in its job, never in the worker's start. A failure here is only
    logged (the first compile meets it again, where it is reported)."""
    import time
    t0 = time.perf_counter()
    try:
        beside = None if device.startswith("cuda") or not _imported(KERNEL_HEADER_IMPORTS) else _beside(cpu_kernel_header)
        importlib.import_module("torch._dynamo")
        importlib.import_module("torch._inductor.compile_fx")
        if beside is not None:
            beside.join()
        if device.startswith("cuda"):
            torch.empty(1, device=device)  # the context
            from torch._inductor.async_compile import maybe_warm_pool, pre_fork_setup
            pre_fork_setup()
            maybe_warm_pool()
        else:
            from torch._inductor import cpu_vec_isa
            cpu_vec_isa.pick_vec_isa()
    except Exception as e:  # noqa: BLE001 (logged; the first compile reports it)
        print(f"parity worker: warm-up for {device} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return
    print(f"parity worker: warmed up for {device} in {time.perf_counter() - t0:.2f} s", file=sys.stderr, flush=True)


# What cpu_kernel_header imports, warm or cold (test_warm.py holds it so), imported before its
# thread starts: two threads importing modules that import each other can deadlock, and importlib
# then raises in one of them. The header's own thread imports nothing.
KERNEL_HEADER_IMPORTS = ("torch._inductor.codecache", "torch._inductor.cpp_builder", "torch._inductor.cpu_vec_isa",
                         "torch.utils._filelock", "torch.utils.cpp_extension")


def _imported(modules) -> bool:
    """Whether each of `modules` imports (a torch without one of them gets no header thread)."""
    try:
        for m in modules:
            importlib.import_module(m)
    except ImportError:
        return False
    return True


def _beside(step):
    """`step` started in a thread of its own (joined by the caller)."""
    import threading
    t = threading.Thread(target=step, name="parity-warm", daemon=True)
    t.start()
    return t


def cpu_kernel_header() -> None:
    """Inductor's precompiled header of its C++ CPU kernels made ready the way its first kernel
    would: the header preprocessed by the compiler and the result hashed (two processes, in every
    fresh process even when every kernel is cached: measured 0.13 s of a cached BERT step's 0.5 s
    compile on a 2-core CPU), its precompiled form found in the cache or built. Run beside the
    worker's imports (warm_up), whose Python it hardly contends with: the work is the compiler's.
    The call is the one `CppPythonBindingsCodeCache.load_async` makes for a kernel (the binding
    cache's flags, no extra flags, the vector ISA, full optimisation), so that Inductor's own cache
    of it (`_precompile_header` is a functools.cache) answers the kernels' calls; a torch whose
    internals differ makes some other call or none, and its compile makes its own as before
    (test_warm.py holds this torch's calls equal). Nothing is raised."""
    try:
        from torch._inductor import codecache
        from torch._inductor import config as inductor_config
        from torch._inductor.cpp_builder import CppBuilder, CppTorchDeviceOptions
        from torch._inductor.cpu_vec_isa import pick_vec_isa
        header = codecache._get_cpp_prefix_header("cpu")
        if not inductor_config.cpp_cache_precompile_headers or not header or sys.platform == "win32":
            return
        command = {**codecache.CppPythonBindingsCodeCache.cpp_compile_command_flags, "device_type": "cpu",
                   "extra_flags": (), "use_relative_path": inductor_config.is_fbcode(), "vec_isa": pick_vec_isa()}
        option = CppTorchDeviceOptions(compile_only=False, min_optimize=False, **command)
        line = CppBuilder(name="o", sources="i", BuildOption=option).get_command_line()
        codecache._precompile_header(header, line, min_optimize=False, **command)
    except Exception as e:  # noqa: BLE001 (the first kernel's compile makes its own call)
        print(f"parity: preparing Inductor's kernel header failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def pick_cpu_isa() -> None:
    """Inductor's choice of vector ISA for C++ kernels, made now with the caches on: the choice is
    kept for the process, so a later compile with the graph caches off (profiling's) neither rebuilds
    nor reloads the probes (measured: 5 probe builds, about 10 s of a 2-core CPU's profile run)."""
    isa_probes()
    try:
        from torch._inductor import cpu_vec_isa
        cpu_vec_isa.pick_vec_isa()
    except Exception as e:  # noqa: BLE001 (the compile meets it again, where it is reported)
        print(f"parity: choosing the CPU's vector ISA failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def first_compile_paid() -> None:
    """What every process's first Inductor compile costs beyond its graph, paid once in a process
    whose forks compile (the fork server, before it serves), on a host without a CUDA device: the
    CPU's vector ISA (pick_cpu_isa) and one tiny CPU graph compiled (dynamo's, AOTAutograd's and
    Inductor's lazy set-up: measured on a 2-core CPU, a process's first cached compile 1.5 s, its
    second 0.05 s). Where CUDA devices are visible (asked through NVML by the caller) neither: a
    graph compiled asks the device's properties, which initialises CUDA (measured on an H200, torch
    2.11), and no fork of a process that did can use it; and the ISA is what CUDA workers never ask
    (its probes, several compiler runs, took 20.7-23.4 s in a fresh process on a 2-GPU H200 host,
    before the server's first fork: the first run with workers kept waited 12.4 s for its worker,
    against 2.7 s for one started afresh; 2.2 s and 1.7 s once the server skipped them), so a fork
    that compiles for the CPU chooses it itself. Compiled without the compile pool (a pool's
    processes and threads would not survive a fork), and dynamo reset after: a fork starts with no
    compiled code. A failure is only logged (each fork's own first compile meets it)."""
    if torch.cuda.is_available():
        return
    pick_cpu_isa()
    try:
        from torch import _dynamo
        from torch._inductor import config as inductor_config
        with inductor_config.patch(compile_threads=1):
            torch.compile(lambda x: torch.relu(x) + 1, backend="inductor", fullgraph=True)(torch.ones(8))
        _dynamo.reset()
    except Exception as e:  # noqa: BLE001 (each fork's first compile reports it)
        print(f"parity: the first compile failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
