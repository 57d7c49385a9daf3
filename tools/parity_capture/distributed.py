"""A distributed program's capture (docs/format.md, "Distributed programs"): under an initialized
process group of more than one rank, each rank writes its own repro dir, OUT/rank<r>, whose
manifest records its rank, the world size and the members of every process group its graphs'
collectives name; rank 0 also writes OUT/manifest.json, the multi-rank dir's index. No rank waits
on another for any of it: each writes what it knows."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional

# Ops parity knows as collectives (its interpreter computes them across ranks), not host ops: a
# namespace's every op, and single ops (interpreter/collectives.h's IsCollective, the same list).
COLLECTIVE_NAMESPACES = ("_c10d_functional",)
COLLECTIVE_OPS = ("_dtensor::shard_dim_alltoall",)


def is_collective(target: str) -> bool:
    """Whether a graph node's target ("ns::name" or "ns::name.overload") is a collective."""
    op = target.split(".")[0]
    return op.split("::")[0] in COLLECTIVE_NAMESPACES or op in COLLECTIVE_OPS
WORLD_FORMAT, WORLD_VERSION = "parity.distributed", 1


def rank_info() -> Optional[Dict[str, int]]:
    """{"rank", "world_size"} of this process's default group, when one of more than one rank is up."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return None
        return {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
    except Exception:  # noqa: BLE001 (a torch without distributed: one process)
        return None


def group_names(gjsons: Iterable[Dict[str, Any]]) -> List[str]:
    """The process group names the graphs' collectives pass (their "group_name" string argument)."""
    names = set()
    for g in gjsons:
        for n in g["nodes"]:
            if n["op"] == "call_function" and is_collective(n["target"]):
                names.update(a for a in n.get("args", []) + list(n.get("kwargs", {}).values()) if isinstance(a, str))
    return sorted(names)


def process_groups(names: Iterable[str]) -> Dict[str, List[int]]:
    """Each group name -> its members' global ranks, in group order (a member's index is its group rank)."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group
    out = {}
    for name in names:
        try:
            pg = _resolve_process_group(name)
        except Exception:  # noqa: BLE001 (a string argument that is not a group: a reduce op's name)
            continue
        out[name] = list(dist.get_process_group_ranks(pg))
    return out


def rank_dir(out_dir: str, info: Dict[str, int]) -> str:
    return os.path.join(out_dir, f"rank{info['rank']}")


def rank_manifest_field(info: Dict[str, int], gjsons: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """The rank's manifest field "distributed"."""
    return {"rank": info["rank"], "world_size": info["world_size"], "process_groups": process_groups(group_names(gjsons))}


def write_world_manifest(out_dir: str, info: Dict[str, int]) -> None:
    """OUT/manifest.json, the multi-rank dir's index (rank 0 writes it; the ranks' dirs follow)."""
    m = {"format": WORLD_FORMAT, "version": WORLD_VERSION, "world_size": info["world_size"],
         "ranks": [f"rank{r}" for r in range(info["world_size"])]}
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, ".manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))
