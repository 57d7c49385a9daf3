"""One rank of a multi-rank dir's real replay (distributed/real.h, docs/distributed.md):

    python -m parity_capture.rank_replay REQUEST.json

joins the replay's process group (gloo on the CPU, NCCL on CUDA; a file store the request names),
makes every process group the rank's collectives name under its recorded name, and runs each of
the rank's graphs compiled by the request's backend, its collectives computed for real by the
group. Writes the outputs (`g<i>/output/<k>`) to the request's "out" safetensors file, and exits 0;
an exception is printed and exits 1. Run by parity, one process per rank, with a deadline.

The group and each recorded group under its name are standalone_ranks.joined's, which the
standalone repro.py of a minimum reduced across ranks runs under torchrun too.

With "compiler_bisect" in the request ({"tol"}), the ranks run PyTorch's compiler bisector in step
instead (compiler_bisect_in_step), and rank 0 writes its answer to the request's "bisect_out"."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

from .backends.python_backends import compiled_once, results_once
from .host_ops import require_plugins
from .reader import load_repro
from .runs import write_tensors
from .same import same_tensor
from .standalone_ranks import joined


def graph_request(repro_dir: str, graph: str, device: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """The request (python_backends') of one graph of this rank's dir, run forward on `device`."""
    return {"repro": repro_dir, "graph": graph, "mode": "eval", "device": device, "options": options}


def graph_results(repro_dir: str, graph: str, device: str, backend: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """One graph of this rank's dir run once, compiled by the dynamo backend (results_once)."""
    return results_once(graph_request(repro_dir, graph, device, options), backend)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    req = json.load(open(argv[0]))
    import warnings
    warnings.filterwarnings("ignore")
    require_plugins()
    with joined(req.get("device", "cpu"), req["rank"], req.get("groups", {}), init_method=f"file://{req['store']}",
                rank=req["rank"], world_size=req["world_size"],
                timeout=datetime.timedelta(seconds=float(req.get("timeout_s", 120)))) as device:
        open(req["ready"], "w").close()  # parity's deadline counts from when every rank is here
        if req.get("compiler_bisect") is not None:
            try:
                answer = compiler_bisect_in_step(req, device)
            except WorldStuck as e:  # the others wait in a collective: no barrier, no teardown
                print(f"rank {req['rank']}: {e}", flush=True)
                sys.stderr.flush()
                os._exit(1)
            if req["rank"] == 0:
                with open(req["bisect_out"], "w") as f:
                    json.dump(answer, f)
            return 0
        results = {}
        for i, graph in enumerate(req["graphs"]):
            print(f"rank {req['rank']}: graph {graph}: compiling and running it with {req['backend']}", flush=True)
            for key, value in graph_results(req["repro"], graph, device, req["backend"], req.get("options", {})).items():
                results[f"g{i}/{key}"] = value
        write_tensors(req["out"], results)
    return 0


def compiler_bisect_in_step(req: Dict[str, Any], device: str) -> Dict[str, Any]:
    """PyTorch's compiler bisector on this rank in step with every other (compiler_bisect.in_step):
    a try passes on this rank when each output of each of its graphs, compiled with the try's
    stage (the request's backend and options for the last), passes same() at the request's
    tolerance against the output the dir stores; the ranks agree by an all_reduce of their
    answers (MIN: a pass where all pass), each try run by try_in_step."""
    from .compiler_bisect import in_step
    repro = load_repro(req["repro"])
    expected = {g.name: g.expected_outputs() for g in repro.graphs}
    backend, options, tol = req["backend"], req.get("options", {}), float(req["compiler_bisect"].get("tol", 1e-4))

    def compile_all(stage: str) -> List[Callable[[], Dict[str, torch.Tensor]]]:
        theirs = stage in ("inductor", backend)  # the last stage: the failing backend itself
        return [compiled_once(graph_request(req["repro"], graph, device, options if theirs else {}), backend if theirs else stage)
                for graph in req["graphs"]]

    def judge(runs: List[Callable[[], Dict[str, torch.Tensor]]]) -> bool:
        for graph, run in zip(req["graphs"], runs):
            got = run()
            if not all(same_tensor(e, got[f"output/{k}"], tol=tol)[0] for k, e in enumerate(expected[graph])):
                return False
        return True

    def agree(ok: bool) -> bool:
        flag = torch.tensor([1 if ok else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    ended = RunsEnded(dist.distributed_c10d._get_default_store(), req["rank"], req["world_size"],
                      float(req.get("timeout_s", 120)))
    return in_step(lambda stage: try_in_step(lambda: compile_all(stage), judge, agree, ended), agree, backend)


class WorldStuck(Exception):
    """A rank's run raised while another rank is still in its run: that one waits in a collective
    this rank will not join, so the world cannot go on (rank_replay's main ends this process at
    once, and parity's replay ends every rank with it, naming this one)."""


class RunsEnded:
    """Each try's runs ended, told through the group's store, never a collective (a rank whose run
    raised part-way cannot tell whether the others wait in a collective of its graph that it will
    never join; one more collective from it would be paired with theirs). Called once per try by
    every rank, its run's exception or None: a rank whose run ran through says so and goes on (to
    the try's agreement, a collective); a rank whose run raised says so and waits until every rank
    has said either (then every rank is past its run's collectives, and the agreement is safe), at
    most `grace(seconds)`; a rank still running then waits in a collective, as far as anyone can
    tell, and WorldStuck says which. Keys are `parity/run<try>/<rank>` in the store."""

    def __init__(self, store, rank: int, world_size: int, timeout_s: float, poll_s: float = 0.05):
        self.store, self.rank, self.world_size, self.timeout_s, self.poll_s = store, rank, world_size, timeout_s, poll_s
        self.tries = 0

    def grace(self, run_seconds: float) -> float:
        """How long a rank whose run raised waits for the others' runs: twice its own run and 10 s
        more (the ranks run the same graphs), never past the group's timeout."""
        return min(self.timeout_s, 10.0 + 2.0 * run_seconds)

    def __call__(self, raised: Optional[BaseException], run_seconds: float) -> None:
        self.tries += 1
        key = f"parity/run{self.tries}/"
        self.store.set(key + str(self.rank), "raised" if raised is not None else "ran")
        if raised is None:
            return
        deadline = time.monotonic() + self.grace(run_seconds)
        waiting = list(range(self.world_size))
        while True:
            waiting = [r for r in waiting if not self.store.check([key + str(r)])]
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(self.poll_s)
        if waiting:
            ranks = ", ".join(str(r) for r in waiting)
            raise WorldStuck(f"running try {self.tries} of the compiler bisection raised {type(raised).__name__}: {raised}; "
                             f"rank {ranks} still ran {self.grace(run_seconds):.0f} s later, waiting in a collective this "
                             "rank will not join: the bisection in step ends here")


def try_in_step(compile_all: Callable[[], Any], judge: Callable[[Any], bool], agree: Callable[[bool], bool],
                ended: Callable[[Optional[BaseException], float], None]) -> bool:
    """One try of the bisection in step on this rank, in two steps every rank takes together: its
    graphs compiled, then (only where every rank compiled them: `agree`) run and judged. A compile
    that raises on one rank alone ends the try on every rank before any runs a collective, where
    the others would wait in one for the group's timeout. A run that raises on one rank: `ended`
    (RunsEnded) waits for the others to be past their runs, or ends the bisection (WorldStuck)
    where one waits in a collective instead. A try that raises, compiling or running, is another
    failure than the accuracy one bisected (as compiler_bisect counts it: e.g. a stage that
    refuses a collective): this rank answers good. (A symbolic graph compiles at a call whose
    compiled code runs nothing: python_backends.compiled_by_a_call_that_runs_nothing.)"""
    try:
        compiled = compile_all()
    except Exception:  # noqa: BLE001 (told to every rank below)
        compiled = None
    if not agree(compiled is not None):
        return True
    started = time.monotonic()
    try:
        ok = judge(compiled)
    except Exception as e:  # noqa: BLE001 (another failure than the one bisected)
        ended(e, time.monotonic() - started)
        return True
    ended(None, time.monotonic() - started)
    return ok


if __name__ == "__main__":
    code = main()
    # The outputs are written: the interpreter's own teardown (the compile workers, the group's
    # threads) has nothing left to do for parity, and a crash in it would fail a finished rank.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
