"""`--kernel NAME`: one generated kernel benchmarked alone on its real arguments (CUDA: events
behind an L2-flushing memset), and with `--kernel-option` the kernel computing the same nodes
in the module compiled with those options."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from .categories import _GRAPH_PREFIX, code_phase, generated_kernels
from .provenance import Provenance
from ..runs import iteration
from .compile import _compile


class KernelRecorder:
    """Records the arguments of the first call of one generated kernel (a module global of the
    compiled module: a C++ kernel function, or a Triton kernel whose `.run` is called), so it
    can be run alone."""

    def __init__(self, name: str, phase: str = "forward"):
        self.name, self.phase, self.call = name, phase, None
        self._undo: List[Callable[[], None]] = []

    @staticmethod
    def _phase_of(mod) -> str:
        try:
            with open(mod.__file__) as f:
                return code_phase(f.read(2000))
        except (OSError, TypeError, AttributeError):
            return "forward"

    def install(self) -> bool:
        import types
        # Inductor loads each compiled module into sys.modules (torch._inductor.runtime.compile_tasks.<key>).
        mods = {id(m): m for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)}
        for mod in mods.values():
            fn = vars(mod).get(self.name)
            if fn is None or not (callable(fn) or hasattr(fn, "run")) or self._phase_of(mod) != self.phase:
                continue
            if hasattr(fn, "run"):  # a Triton kernel (CachingAutotuner)
                original = fn.run

                def run(*args, _orig=original, **kwargs):
                    if self.call is None:
                        self.call = (lambda: _orig(*args, **kwargs), args)
                    return _orig(*args, **kwargs)
                fn.run = run
                self._undo.append(lambda fn=fn, o=original: setattr(fn, "run", o))
            else:
                def call(*args, _orig=fn):
                    if self.call is None:
                        self.call = (lambda: _orig(*args), args)
                    return _orig(*args)
                setattr(mod, self.name, call)
                self._undo.append(lambda mod=mod, o=fn: setattr(mod, self.name, o))
        return bool(self._undo)

    def uninstall(self):
        for undo in self._undo:
            undo()
        self._undo = []

    def bench(self, sync, reps: int, cuda: bool) -> Dict[str, Any]:
        """Times of the kernel alone: on CUDA each call between two CUDA events, behind a 256 MB
        memset that flushes the L2 cache and keeps the GPU busy while the call is enqueued (so
        the events time the kernel, not its launch), as Inductor's benchmarker does; on the CPU
        batches of calls long enough for the clock."""
        run, args = self.call
        nbytes = sum(a.untyped_storage().nbytes() for a in args if isinstance(a, torch.Tensor))
        for _ in range(3):
            run()
        sync()
        times = []
        if cuda:
            flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for start, end in pairs:
                flush.zero_()
                start.record()
                run()
                end.record()
            sync()
            times = [start.elapsed_time(end) for start, end in pairs]
        else:
            t0 = time.perf_counter()
            run()
            one = max(time.perf_counter() - t0, 1e-7)
            inner = max(1, min(1000, int(1e-3 / one)))
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(inner):
                    run()
                times.append((time.perf_counter() - t0) * 1e3 / inner)
        return {"times_ms": times, "bytes": nbytes}



def same_work(nodes: List[str], provenance: "Provenance", kernels: Dict[str, str], phase: str) -> Optional[str]:
    """The generated kernel of another compile that computes the most of `nodes` (the input
    graph's nodes one kernel computed): kernel names follow the fusion decisions, so a changed
    option can rename or refuse the kernel while the nodes stay."""
    want, best, best_score = set(nodes), None, 0.0
    for k in kernels:
        have = set(provenance.nodes(k, phase)["nodes"])
        score = len(want & have) / len(want | have) if want | have else 0.0
        if score > best_score:
            best, best_score = k, score
    return best



def kernel_request(spec: str, kernels: Dict[str, Dict[str, str]]) -> tuple:
    """(phase, name) of --kernel's NAME, "forward:NAME" or "backward:NAME" (a train step's two
    compiled modules may name kernels alike; a bare name is the forward's when both have it)."""
    phase, _, name = spec.rpartition(":") if spec.startswith(("forward:", "backward:")) else ("", "", spec)
    name = _GRAPH_PREFIX.sub("", name)
    for p in ([phase] if phase else ["forward", "backward"]):
        if name in kernels[p]:
            return p, name
    known = ", ".join(sorted(f"{k}" if p == "forward" else f"backward:{k}" for p in kernels for k in kernels[p])) or "none"
    raise LookupError(f"--kernel {spec}: no generated kernel of that name (kernels: {known})")



def bench_kernel(req, gm, inputs, train, tangents, sync, step, kernels, provenance) -> Dict[str, Any]:
    """Runs one generated kernel alone on the arguments it got in the model, with the backend's
    options and, if given, once more compiled with `kernel_options` changed (there, the kernel
    computing the same graph nodes, whatever its name)."""
    from torch._inductor.utils import run_and_get_code
    phase, name = kernel_request(req["kernel"], kernels)
    reps = int(req.get("kernel_reps", 30))
    runs = []

    def measure(run_step, kernel, category, label):
        rec = KernelRecorder(kernel, phase)
        if not rec.install():
            raise LookupError(f"--kernel {kernel}: the compiled module holding it was not found")
        try:
            run_step()
            sync()
        finally:
            rec.uninstall()
        if rec.call is None:
            raise LookupError(f"--kernel {kernel}: not called in an iteration")
        out = rec.bench(sync, reps, req.get("device", "cpu").startswith("cuda"))
        out.update(options=label, kernel=kernel, category=category)
        runs.append(out)

    measure(step, name, kernels[phase][name], dict(req.get("options", {})))
    nodes = provenance.nodes(name, phase)["nodes"]
    if req.get("kernel_options"):
        torch._dynamo.reset()
        options = dict(req.get("options", {}), **req["kernel_options"])
        compiled, config = _compile(gm, req["backend"], options, profiling=True)
        step2 = iteration(compiled, inputs, train, tangents)
        again = Provenance()
        with config(), again.collecting():
            _, codes = run_and_get_code(step2)
            of_run = generated_kernels(codes)[phase]
            target = name if name in of_run else same_work(nodes, again, of_run, phase)
            if target is None:
                raise LookupError(f"--kernel {name}: compiled with {req['kernel_options']}, no kernel computes its nodes "
                                  f"(kernels: {', '.join(sorted(of_run))})")
            measure(step2, target, of_run[target], options)
    return {"name": name, "phase": phase, "category": kernels[phase][name], "nodes": nodes, "runs": runs}
