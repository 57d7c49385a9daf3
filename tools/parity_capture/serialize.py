"""FX graph -> parity graph JSON, and the repro-dir writer (docs/format.md)."""
from __future__ import annotations

import hashlib
import json
import math
import operator
import os
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
from .checkpointed import restore as checkpoint_calls
from .differentiable import differentiable_calls
from .errors import CaptureError
from .functionalized import mutating_calls
from .standalone_graph import FORMAT_VERSION, GETITEM, SYM_FUNCTIONS, SYM_TARGET_ALIASES, save_tensors


def target_name(target: Any) -> str:
    if target is operator.getitem:
        return GETITEM
    for name, fn in SYM_FUNCTIONS.items():  # size arithmetic of symbolic graphs
        if target is fn:
            return "sym::" + name
    if target in SYM_TARGET_ALIASES:
        return "sym::" + SYM_TARGET_ALIASES[target]
    if target is math.trunc or target is int:
        return "sym::int"
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
        return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name
    if isinstance(target, torch._ops.HigherOrderOperator):
        return "hop::" + target.name()
    raise CaptureError(f"call_function target {target!r} is not an ATen operator")


# Higher-order ops whose arguments name objects of the program's own process (a user's Triton
# kernel by its index in torch's kernel side table): no other process can run such a graph.
_PROCESS_LOCAL_HOPS = ("triton_kernel_wrapper_functional", "triton_kernel_wrapper_mutation")


def _refuse_process_local(n: fx.Node) -> None:
    """A CaptureError for a call no recorded graph can hold (_PROCESS_LOCAL_HOPS), naming the kernel
    and the way to record it."""
    if not isinstance(n.target, torch._ops.HigherOrderOperator) or n.target.name() not in _PROCESS_LOCAL_HOPS:
        return
    kernel = "?"
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
        k = kernel_side_table.get_kernel(n.kwargs["kernel_idx"])
        fn = getattr(k, "fn", k)
        fn = getattr(fn, "fn", fn)  # an autotuner's JIT function's Python function
        kernel = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    except Exception:  # noqa: BLE001 - only the message's name
        pass
    # one line of under 200 characters (what a capture warning keeps), the way to record it first
    raise CaptureError(f"node {n.name}: Triton kernel {kernel} launched directly; launched through "
                       "torch.library.triton_op it is recorded (a host op: verify --import MODULE)")


def encode_arg(a: Any, subgraph_of: Optional[Dict[str, str]] = None) -> Any:
    """An FX argument as JSON (docs/format.md). `subgraph_of`: get_attr nodes of graph modules
    (node name -> attribute), written as {"subgraph": attribute}."""
    if isinstance(a, fx.Node):
        if subgraph_of and a.name in subgraph_of:
            return {"subgraph": subgraph_of[a.name]}
        return {"node": a.name}
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        if math.isnan(a):
            return {"float": "nan"}
        if math.isinf(a):
            return {"float": "inf" if a > 0 else "-inf"}
        return a
    if isinstance(a, (list, tuple)):
        return [encode_arg(x, subgraph_of) for x in a]
    if isinstance(a, dict):  # a higher-order op's options (flex_attention's kernel_options)
        return {"dict": {str(k): encode_arg(v, subgraph_of) for k, v in a.items()}}
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    if isinstance(a, torch.layout):
        return {"layout": str(a).removeprefix("torch.")}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise CaptureError(f"symbolic value {a} (dynamic shapes are not supported; capture with static shapes)")
    raise CaptureError(f"argument of type {type(a).__name__} cannot be serialized: {a!r}")


def _is_sym(v: Any) -> bool:
    return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))


def sym_text(v: Any) -> str:
    """A symbolic value's expression in the ShapeEnv's symbols ("s77", "2*s77")."""
    return str(v.node.expr)


def backed_values(shape_env) -> Dict[Any, Any]:
    """The ShapeEnv's symbols that inputs' sizes give, with their values in the traced call
    (`backed_var_to_val` from torch 2.13, `var_to_val` before)."""
    values = getattr(shape_env, "backed_var_to_val", None)
    return values if values is not None else shape_env.var_to_val


def sym_hint(v: Any, unbacked: Optional[Dict[str, int]] = None) -> Any:
    """The value a symbolic size took in the recorded call (its hint); plain numbers as they are.
    `unbacked`: the values data-dependent symbols (u0) took in that call, by name."""
    if not _is_sym(v):
        return v
    node = v.node
    hint = node.expr.xreplace(backed_values(node.shape_env)) if node.shape_env is not None else node.expr
    if unbacked and not getattr(hint, "is_number", False):
        import sympy
        hint = hint.xreplace({s: sympy.sympify(unbacked[str(s)]) for s in hint.free_symbols if str(s) in unbacked})
    if not getattr(hint, "is_number", False):
        raise CaptureError(f"symbolic value {v} has no recorded value (a data-dependent size)")
    return float(hint) if isinstance(v, torch.SymFloat) else bool(hint) if isinstance(v, torch.SymBool) else int(hint)


def _tensor_meta(v: Any, unbacked: Optional[Dict[str, int]] = None) -> Optional[Dict[str, Any]]:
    if isinstance(v, torch.Tensor):
        shape = list(v.shape)
        meta = {"dtype": str(v.dtype).removeprefix("torch."), "shape": [int(sym_hint(s, unbacked)) for s in shape],
                "stride": [int(sym_hint(s, unbacked)) for s in v.stride()]}
        if any(_is_sym(s) and s.node.expr.free_symbols for s in shape):
            meta["sym_shape"] = [sym_text(s) if _is_sym(s) and s.node.expr.free_symbols else None for s in shape]
        return meta
    return None


# parity's own wrapper around a model (capture.WithLoss: the model followed by its loss) is not
# where any op comes from; its frames are dropped from the recorded stack traces.
_WRAPPER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture.py")


def user_stack_trace(stack_trace: str) -> str:
    """An FX stack trace without the frames of parity's capture wrapper ("" when nothing else
    is left). Frames are 'File "<path>", line N, in fn' lines, each followed by its code."""
    frames: List[List[str]] = []
    for line in stack_trace.rstrip().splitlines():
        if line.lstrip().startswith('File "'):
            frames.append([line])
        elif frames:
            frames[-1].append(line)
    kept = [f for f in frames if f'File "{_WRAPPER_FILE}"' not in f[0]]
    if len(kept) == len(frames):
        return stack_trace.rstrip()
    return "\n".join(line for f in kept for line in f)


def node_meta(node: fx.Node, unbacked: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    meta: Dict[str, Any] = {}
    val = node.meta.get("val", node.meta.get("example_value"))
    if _is_sym(val):
        meta["sym"] = sym_text(val)
        if not isinstance(val, torch.SymInt):
            meta["sym_type"] = "float" if isinstance(val, torch.SymFloat) else "bool"
    elif isinstance(val, (list, tuple)):
        meta["val"] = [_tensor_meta(v, unbacked) for v in val]
    elif isinstance(val, torch.Tensor):
        meta["val"] = [_tensor_meta(val, unbacked)]
    st = user_stack_trace(node.meta.get("stack_trace") or "")
    if st:
        meta["stack_trace"] = st
    stack = node.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1][0]
        if path:
            meta["module_path"] = path
    return meta


def prims_as_aten(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrites prims ops (registered from Python only, so not in a C++ process's dispatcher) into
    the ATen ops their eager implementations run, in place: the one table of them. A prim with no
    entry stays, and a consumer names it as an unknown op; never a silent substitute.
      convert_element_type(x, dtype) -> _to_copy(x, dtype=dtype)
      iota(length, start=, step=, dtype=, device=) -> arange.start_step(start, start + step * length, step)
      fma(a, b, c) -> add(mul(a, b), c)  (inductor_prims.fma's eager implementation, which dynamo
                                          puts in graphs for addcmul/lerp-style updates)"""
    prims, aten = torch.ops.prims, torch.ops.aten
    rewrote = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target is prims.convert_element_type.default:
            x, dtype = n.args
            n.target, n.args, n.kwargs = aten._to_copy.default, (x,), {"dtype": dtype}
        elif n.target is prims.iota.default:
            length, kw = n.args[0], n.kwargs
            start, step = kw.get("start", 0), kw.get("step", 1)
            n.target, n.args = aten.arange.start_step, (start, start + step * length, step)
            n.kwargs = {"dtype": kw.get("dtype"), "device": kw.get("device")}
        elif hasattr(prims, "fma") and n.target is prims.fma.default:
            a, b, c = n.args
            with gm.graph.inserting_before(n):
                product = gm.graph.call_function(aten.mul.Tensor, (a, b))
            product.meta.update(n.meta)
            n.target, n.args, n.kwargs = aten.add.Tensor, (product, c), {}
        else:
            continue
        rewrote = True
    if rewrote:
        gm.graph.lint()
        gm.recompile()
    return gm


# The kernels scaled_dot_product_attention dispatches to (for a device and its inputs) and the name
# each gives the attention mask.
_SDPA_KERNELS = {
    "_scaled_dot_product_cudnn_attention": "attn_bias",
    "_scaled_dot_product_flash_attention": None,
    "_scaled_dot_product_efficient_attention": "attn_bias",
    "_scaled_dot_product_flash_attention_for_cpu": "attn_mask",
    "_scaled_dot_product_fused_attention_overrideable": "attn_bias",
}


def attention_as_sdpa(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrites, in place, each call of a kernel scaled_dot_product_attention dispatched to (cuDNN,
    flash, memory-efficient, the CPU's flash) whose output alone is used into the
    scaled_dot_product_attention the program called, with the same query, key, value, mask,
    dropout, causality and scale. AOTAutograd records the kernel the device picked; the recorded
    graph then names the attention, and every consumer dispatches it as eager does for its own
    device and dtype: the fp64 reference runs where the kernel has no float64, a CUDA capture
    replays on the CPU, and a backend compiles it with its own attention (Inductor's compile of a
    train graph holding the cuDNN kernel raised on torch 2.11: traced without grad, it computes no
    logsumexp). Grouped-query attention keeps enable_gqa. A call whose other outputs are read (a
    backward's logsumexp) stays."""
    import operator
    aten = torch.ops.aten
    rewrote = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        mask_name = _SDPA_KERNELS.get(n.target._schema.name.removeprefix("aten::"), False)
        if mask_name is False:
            continue
        users = list(n.users)
        # Its output read, its other results unread (AOTAutograd leaves their getitems behind).
        if not all(u.op == "call_function" and u.target is operator.getitem and (u.args[1] == 0 or not u.users)
                   for u in users):
            continue
        schema = n.target._schema
        given = {a.name: v for a, v in zip(schema.arguments, n.args)}
        given.update(n.kwargs)
        get = lambda k, d=None: given.get(k, d)  # noqa: E731
        # Grouped-query attention: the kernel took fewer key/value heads than query heads.
        q, k = (getattr(get(x), "meta", {}).get("val") for x in ("query", "key"))
        gqa = isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() >= 3 and q.shape[-3] != k.shape[-3]
        with gm.graph.inserting_before(n):
            sdpa = gm.graph.call_function(aten.scaled_dot_product_attention.default,
                                          (get("query"), get("key"), get("value")),
                                          {"attn_mask": get(mask_name) if mask_name else None,
                                           "dropout_p": get("dropout_p", 0.0), "is_causal": get("is_causal", False),
                                           "scale": get("scale"), **({"enable_gqa": True} if gqa else {})})
        sdpa.meta.update(n.meta)
        output = [u for u in users if u.args[1] == 0]
        if output:
            sdpa.meta["val"] = output[0].meta.get("val")
        for u in users:
            u.replace_all_uses_with(sdpa)
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)
        rewrote = True
    if rewrote:
        gm.graph.lint()
        gm.recompile()
    return gm


def graph_to_json(gm: fx.GraphModule, name: str, attr_keys: Dict[str, str],
                  symbols: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """`attr_keys` maps a placeholder name to a tensor key: such placeholders (parameters,
    buffers, constants) become get_attr nodes reading that key. `symbols`: a symbolic graph's
    {"symbols": {...}, "guards": [...]} (symbolic_facts). Prims ops are written as ATen
    (prims_as_aten), the attention kernels dispatch picked as the attention (attention_as_sdpa),
    calls autograd cannot differentiate as calls it can (differentiable_calls). The graph
    modules its higher-order ops take (a cond's branches, a flex_attention's score and mask
    functions) are its "subgraphs", written the same way (format version 3)."""
    symbols = _with_subgraph_symbols(gm, symbols)
    unbacked = {k: s["hint"] for k, s in (symbols or {}).get("symbols", {}).items() if s.get("unbacked")}
    out = {"format": "parity.graph", "version": FORMAT_VERSION, "name": name}
    out.update(_graph_body(gm, attr_keys, unbacked, top=True))
    if symbols:
        out.update(symbols)
    return out


def _with_subgraph_symbols(gm: fx.GraphModule, symbols: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """`symbols` with the sizes a subgraph makes fresh each time it runs declared too (a
    while_loop's body is traced with fresh symbols for its carried values' sizes): declared
    unbacked, with the value the trace recorded, as values the graph makes as it runs."""
    declared = set((symbols or {}).get("symbols", {}))
    fresh: Dict[str, int] = {}

    def visit(m: fx.GraphModule, top: bool) -> None:
        for n in m.graph.nodes:
            if n.op == "get_attr" and isinstance(_attr(m, n.target), fx.GraphModule):
                visit(_attr(m, n.target), False)
            if top:
                continue
            v = n.meta.get("val")
            for x in (v if isinstance(v, (list, tuple)) else [v]):
                sizes = list(x.shape) + list(x.stride()) if isinstance(x, torch.Tensor) else [x]
                for d in sizes:
                    if _is_sym(d):
                        for s in d.node.expr.free_symbols:
                            if str(s) not in declared and str(s) not in fresh and d.node.shape_env is not None:
                                hint = backed_values(d.node.shape_env).get(s)
                                if hint is not None:
                                    fresh[str(s)] = int(hint)

    visit(gm, True)
    if not fresh:
        return symbols
    out = {"symbols": dict((symbols or {}).get("symbols", {})), "guards": list((symbols or {}).get("guards", []))}
    for name, hint in fresh.items():
        out["symbols"][name] = {"hint": hint, "min": None, "max": None, "unbacked": True}
    return out


def _unread_constant(n: fx.Node) -> bool:
    """Whether placeholder `n` is an input no node reads and that holds no tensor and no symbol: a
    constant the graph was specialized to (an int the program passed, such as an index dynamo made
    dynamic after a recompile and then specialized again; None), which export, AOTAutograd and
    dynamo all keep as a placeholder without a value. A repro dir holds tensors and symbols only,
    so the top graph is written without it (its manifest entry never lists it as an input)."""
    from torch.fx.experimental.symbolic_shapes import free_symbols
    if n.users:
        return False
    v = n.meta.get("val", n.meta.get("example_value"))
    if isinstance(v, torch.Tensor) or (isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v)):
        return False
    return not (isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) and free_symbols(v))


def _graph_body(gm: fx.GraphModule, attr_keys: Dict[str, str], unbacked: Dict[str, Any], top: bool) -> Dict[str, Any]:
    """{"nodes": [...], "subgraphs": {...}} of one graph module (the top graph, or a subgraph)."""
    prims_as_aten(gm)
    checkpoint_calls(gm)
    attention_as_sdpa(gm)
    mutating_calls(gm)
    differentiable_calls(gm)
    # get_attr nodes of graph modules are subgraphs: not nodes, named by the arguments reading them
    subgraph_of = {n.name: str(n.target) for n in gm.graph.nodes
                   if n.op == "get_attr" and isinstance(_attr(gm, n.target), fx.GraphModule)}
    subgraphs = {target: _graph_body(_attr(gm, target), {}, unbacked, top=False) for target in sorted(set(subgraph_of.values()))}
    enc = lambda a: encode_arg(a, subgraph_of)  # noqa: E731
    nodes: List[Dict[str, Any]] = []
    # parity wants placeholders first, then get_attr; FX graphs from export interleave nothing
    # but keep them in one block, so a stable partition keeps the order otherwise.
    ordered = [n for n in gm.graph.nodes if n.op == "placeholder" and n.name not in attr_keys
               and not (top and _unread_constant(n))]
    ordered += [n for n in gm.graph.nodes if n.op == "placeholder" and n.name in attr_keys]
    ordered += [n for n in gm.graph.nodes if n.op != "placeholder" and n.name not in subgraph_of]
    for n in ordered:
        entry: Dict[str, Any] = {"name": n.name}
        if n.op == "placeholder":
            if n.name in attr_keys:
                entry.update(op="get_attr", target=attr_keys[n.name])
            else:
                entry.update(op="placeholder", target=n.name)
        elif n.op == "get_attr":
            if not top and n.name not in attr_keys:
                raise CaptureError(f"node {n.name}: a subgraph reads the tensor attribute {n.target} (not lifted to an operand)")
            entry.update(op="get_attr", target=attr_keys.get(n.name, str(n.target)))
        elif n.op == "call_function":
            _refuse_process_local(n)
            entry.update(op="call_function", target=target_name(n.target))
            entry["args"] = [enc(a) for a in n.args]
            if n.kwargs:
                entry["kwargs"] = {k: enc(v) for k, v in n.kwargs.items()}
        elif n.op == "output":
            outs = n.args[0]
            if not top:  # a subgraph returns what its higher-order op expects: one value, or a tuple
                entry.update(op="output", args=[enc(outs)])
            else:
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                entry.update(op="output", args=[[enc(o) for o in outs if isinstance(o, fx.Node)]])
        else:
            raise CaptureError(f"node {n.name}: op {n.op} is not supported (lower call_module/call_method first)")
        meta = node_meta(n, unbacked)
        if meta:
            entry["meta"] = meta
        nodes.append(entry)
    body: Dict[str, Any] = {"nodes": nodes}
    if subgraphs:
        body["subgraphs"] = subgraphs
    return body


def _attr(gm: fx.GraphModule, target: str) -> Any:
    obj = gm
    for part in str(target).split("."):
        obj = getattr(obj, part, None)
    return obj


def _finite(bound) -> Optional[int]:
    """A range bound as an int; None for an infinite one (sympy's oo, torch's int_oo)."""
    if "oo" in str(bound):
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError):
        return None


def symbolic_facts(gm: fx.GraphModule, shape_env, values: Dict[str, int]) -> Dict[str, Any]:
    """The symbols a symbolic graph reads, each with its value in the recorded call (`values`,
    else the ShapeEnv's hint) and its range, and the ShapeEnv's guards over them. A symbol the
    graph makes from data (unbacked: `.item()`, `nonzero`'s size) is declared `unbacked` with the
    value it took in the call (`values` must hold it); the guards leave such symbols out (the
    graph checks them itself, with its _assert_scalar nodes)."""
    used = set()
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if _is_sym(x):
                used |= {str(s) for s in x.node.expr.free_symbols}
            elif isinstance(x, torch.Tensor):
                for d in list(x.shape) + list(x.stride()):
                    if _is_sym(d):
                        used |= {str(s) for s in d.node.expr.free_symbols}
    symbols = {}
    for sym, val in backed_values(shape_env).items():
        if str(sym) not in used:
            continue
        rng = shape_env.var_to_range.get(sym)
        lo = _finite(rng.lower) if rng is not None else None
        hi = _finite(rng.upper) if rng is not None else None
        lo = 0 if lo is None else lo
        symbols[str(sym)] = {"hint": int(values.get(str(sym), val)), "min": lo, "max": hi}
    for name in sorted(used - set(symbols)):
        if name not in values:
            raise CaptureError(f"the data-dependent value {name} of the graph was not observed in the recorded call")
        value = values[name]
        if isinstance(value, float) or name.startswith("zuf"):  # a data-dependent float: its value, no range
            if not math.isfinite(float(value)):
                raise CaptureError(f"the data-dependent value {name} is {value}: the format holds finite values only")
            symbols[name] = {"hint": float(value), "min": None, "max": None, "unbacked": True}
            continue
        rng = next((r for s, r in shape_env.var_to_range.items() if str(s) == name), None)
        lo = _finite(rng.lower) if rng is not None else None
        hi = _finite(rng.upper) if rng is not None else None
        # a range the recorded value lies outside (a float symbol's -oo..oo read as ints) is left open
        lo = None if lo is not None and value < lo else lo
        hi = None if hi is not None and value > hi else hi
        symbols[name] = {"hint": int(value), "min": lo, "max": hi, "unbacked": True}
    guards = []
    backed = {k for k, s in symbols.items() if not s.get("unbacked")}
    for g in shape_env.guards:
        free = {str(s) for s in g.expr.free_symbols}
        if free and free <= backed:
            guards.append(str(g.expr))
    return {"symbols": symbols, "guards": guards}


def _atomic_write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_repro_dir(out_dir: str, manifest: Dict[str, Any], graphs: Sequence[Tuple[Dict[str, Any], Dict[str, Any]]],
                    tensors: Dict[str, torch.Tensor]) -> str:
    """graphs: (graph_json, manifest_entry) pairs; tensors: key -> tensor (saved contiguous, CPU)."""
    os.makedirs(os.path.join(out_dir, "graphs"), exist_ok=True)
    entries = []
    for gjson, entry in graphs:
        _atomic_write(os.path.join(out_dir, entry["file"]), (json.dumps(gjson, indent=1) + "\n").encode())
        entries.append(entry)
    tmp = os.path.join(out_dir, ".tensors.safetensors.tmp")
    save_tensors(tmp, tensors)
    os.replace(tmp, os.path.join(out_dir, "tensors.safetensors"))
    digest = hashlib.sha256()
    with open(os.path.join(out_dir, "tensors.safetensors"), "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    m = dict(manifest)
    m.update(format="parity.repro", version=FORMAT_VERSION, tensors="tensors.safetensors",
             tensors_sha256=digest.hexdigest(), graphs=entries)
    _atomic_write(os.path.join(out_dir, "manifest.json"), (json.dumps(m, indent=2) + "\n").encode())
    return out_dir
