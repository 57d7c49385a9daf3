"""One rank of a multi-rank dir run for real, as a standalone script runs it: the process group
(gloo on the CPU, NCCL on CUDA) with every recorded group made under its recorded name, and,
under torchrun, the rank's graphs compiled by a dynamo backend and each output judged against the
output the dir stores (torchrun_main).

Needs only torch and safetensors: `parity minify` inlines same.py, standalone_graph.py,
standalone.py and this file into the repro.py of a minimum reduced across ranks (repro_script.py:
write_world_script); rank_replay.py, parity's own real replay, makes its groups here too, so the
script and parity set a rank up alike. Lines marked `package-only` are left out of the script."""
import contextlib
import json
import os

import torch
import torch.distributed as dist

from parity_capture.same import same_tensor  # package-only
from parity_capture.standalone import ReproDirGraph, compile_for, deterministic_setup, on_device, run  # package-only


def name_groups(groups):
    """Each recorded group (name -> members in group order) as a group of this run under that
    name: the default group where it is the whole world under its own name, else a new group
    (every rank creates every group, in the same order, as torch requires) registered by name."""
    world = dist.get_world_size()
    default_name = dist.group.WORLD.group_name
    for name, members in sorted(groups.items(), key=lambda kv: (len(kv[0]), kv[0])):
        if members == list(range(world)) and name == default_name:
            continue
        pg = dist.new_group(members)
        if dist.get_rank() in members and pg.group_name != name:
            torch._C._distributed_c10d._register_process_group(name, pg)


@contextlib.contextmanager
def joined(device, local_rank, groups, **init):
    """This rank in the run's process group (gloo on the CPU; NCCL on CUDA, the GPU picked by
    `local_rank`, round robin), every recorded group made under its name (name_groups); yields the
    device. On the way out a barrier first: no rank tears its group down while another still runs
    a collective in it (gloo's teardown under a peer's collective can end a process by a signal)."""
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", **init)
    try:
        name_groups(groups)
        yield device
        dist.barrier()
    finally:
        dist.destroy_process_group()


def rank_dirs(world_dir):
    """Each rank's repro dir in the multi-rank dir `world_dir`, in rank order (its index names them)."""
    with open(os.path.join(world_dir, "manifest.json")) as f:
        return [os.path.join(world_dir, name) for name in json.load(f)["ranks"]]


def world_groups(world_dir):
    """Every group any rank of `world_dir` records (name -> members): every rank makes every group,
    also those it is not in (torch's new_group is called by the whole world), so each needs all."""
    groups = {}
    for d in rank_dirs(world_dir):
        with open(os.path.join(d, "manifest.json")) as f:
            groups.update(json.load(f).get("distributed", {}).get("process_groups", {}))
    return groups


def torchrun_main(world_dir, backend, options, tol):
    """This rank of `world_dir` for real (RANK, LOCAL_RANK and the rendezvous from torchrun's
    environment): each of its graphs run forward, compiled by the dynamo backend `backend` with
    `options` (standalone.compile_for), its collectives run by the group; 0 when every output
    passes same() at `tol` against the output the dir stores, else 1, each output's verdict printed."""
    rank = int(os.environ["RANK"])
    here = rank_dirs(world_dir)[rank]
    first = ReproDirGraph(here)
    deterministic_setup()
    failed = 0
    with joined(first.manifest.get("device", "cpu"), int(os.environ.get("LOCAL_RANK", rank)), world_groups(world_dir)) as device:
        for index in range(len(first.manifest["graphs"])):
            d = first.graph(index)
            gm = on_device(d.module(), device)
            fn = compile_for(gm, backend, options, True if gm.parity_symbols else None)
            got = run(fn, d.inputs(), device)
            for k, key in enumerate(d.entry.get("expected_outputs", [])):
                ok, _, why = same_tensor(d.tensors[key], got[f"output/{k}"], tol=tol)
                failed += not ok
                print(f"rank {rank}: {d.entry['name']} output {k}: {'PASS' if ok else 'FAIL ' + why}", flush=True)
    return 1 if failed else 0
