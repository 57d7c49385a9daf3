"""Whether a lowered graph computes what the program did: its outputs against the program's own
(output_mismatch, for capture()) and its replay through the interpreter's rules against the
program's values (replay_mismatch, for the dump backend), random ops aside."""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from .standalone import on_device
from .standalone_graph import graph_from_json, placeholder_values


def output_mismatch(lowered) -> Optional[str]:
    """Where a lowered graph's outputs (their recorded metadata) differ in dtype or shape from
    the values the program produced (its expected outputs), in words; None when they agree. A
    graph that would replay in another dtype than the program ran is never recorded as if it
    were the program."""
    gjson, entry, tensors = lowered
    metas = {n["name"]: (n.get("meta") or {}).get("val") for n in gjson["nodes"]}
    out = next(n for n in gjson["nodes"] if n["op"] == "output")
    refs = out["args"][0] if out["args"] and isinstance(out["args"][0], list) else out["args"]
    expected = [tensors[k] for k in entry["expected_outputs"]]
    for k, (ref, value) in enumerate(zip(refs, expected)):
        val = metas.get(ref.get("node")) if isinstance(ref, dict) else None
        if not val or not val[0]:  # a number the graph returns, or no metadata
            continue
        dtype = str(value.dtype).removeprefix("torch.")
        if val[0]["dtype"] != dtype:
            return f"output {k} is {val[0]['dtype']} in the graph, {dtype} in the program"
        if "sym_shape" not in val[0] and list(val[0]["shape"]) != list(value.shape):
            return f"output {k} has shape {val[0]['shape']} in the graph, {list(value.shape)} in the program"
    return None


def _draws_random(node: Dict[str, Any]) -> bool:
    """Whether a recorded call draws random numbers: its op is tagged nondeterministic_seeded (the
    fact parity's interpreter asks, interpreter/compile.cpp DrawsRandom), unless it takes a dropout_p that is 0
    (attention's ops carry the tag for their dropout). An op torch does not know draws none."""
    namespace, _, name = (node.get("target") or "").partition("::")
    packet = getattr(getattr(torch.ops, namespace, None), name.split(".")[0], None) if name else None
    try:
        op = getattr(packet, name.split(".")[1] if "." in name else "default")
    except (AttributeError, RuntimeError):
        return False
    if torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    names = [a.name for a in op._schema.arguments]
    if "dropout_p" not in names:
        return True
    k = names.index("dropout_p")
    args = node.get("args") or []
    p = args[k] if k < len(args) else (node.get("kwargs") or {}).get("dropout_p", op._schema.arguments[k].default_value)
    return not (isinstance(p, (int, float)) and p == 0)


_16_BIT = ("float16", "bfloat16")


def _computes_in_16_bit(gjson: Dict[str, Any]) -> bool:
    """Whether a node of the graph (or of a subgraph) makes a 16-bit floating value: an autocast
    region (amp bf16/fp16), or a half-precision model. Its float32 outputs then carry 16-bit
    rounding: another attention kernel chosen at the replay (SDPA's backends on CUDA) moves them
    by about 1% through a few layers."""
    for n in gjson["nodes"]:
        for v in ((n.get("meta") or {}).get("val") or []):
            if isinstance(v, dict) and v.get("dtype") in _16_BIT:
                return True
    return any(_computes_in_16_bit(sg) for sg in (gjson.get("subgraphs") or {}).values())


def replay_mismatch(gjson: Dict[str, Any], entry: Dict[str, Any], tensors: Dict[str, torch.Tensor],
                    device: str = "cpu") -> Optional[str]:
    """Runs the recorded graph (as repro.py reads it back) on its recorded inputs and says where
    a floating output leaves what the program got by more than rounding does (relative RMS error
    above 1e-2; 5e-2 where the graph computes in a 16-bit dtype anywhere, and NaN/inf where the
    program had none: a wrong lowering is off by far more than either); None when every
    output agrees, the graph draws random numbers, or the replay itself cannot run (parity's
    interpreter may still). A wrong lowering (a transform traced as zeros, a tensor under another
    tensor's key) is never recorded as if it were the program: both sides of a verify would agree
    on it."""
    def random(g):
        return any(n["op"] == "call_function" and _draws_random(n) for n in g["nodes"]) or \
            any(random(sg) for sg in (g.get("subgraphs") or {}).values())
    if random(gjson):
        return None
    # In the grad mode the program ran it, with what it differentiated requiring grad: kernels
    # are chosen by it (scaled_dot_product_attention on CUDA picks another backend for a call
    # that will be differentiated), and another kernel rounds otherwise.
    needs = set(entry.get("requires_grad") or [])
    try:
        gm = on_device(graph_from_json(gjson, tensors, parameters=lambda key: key in needs), device)
        names = [n["name"] for n in gjson["nodes"] if n["op"] == "placeholder"]
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in placeholder_values(gjson, entry, tensors)]
        inputs = [x.detach().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() and name in needs
                  else x for x, name in zip(inputs, names)]
        with torch.set_grad_enabled(bool(needs)):
            out = gm(*inputs)
    except Exception:
        return None
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    half = _computes_in_16_bit(gjson)
    for k, (got, key) in enumerate(zip(out, entry["expected_outputs"])):
        want = tensors[key]
        if not isinstance(got, torch.Tensor) or not want.is_floating_point() or got.shape != want.shape:
            continue
        a, b = got.detach().to("cpu", torch.float64), want.to(torch.float64)
        if not torch.equal(a.isfinite(), b.isfinite()):
            return f"output {k} ({entry.get('output_names', [None] * (k + 1))[k] or k}): non-finite values where the program had finite ones or the reverse"
        finite = b.isfinite()
        diff = (a[finite] - b[finite]).norm() / (b[finite].norm() + 1e-12)
        limit = 5e-2 if half or want.dtype in (torch.float16, torch.bfloat16) else 1e-2
        if diff > limit:
            return f"output {k}: relative RMS difference {float(diff):.3g} from the program's value"
    return None
