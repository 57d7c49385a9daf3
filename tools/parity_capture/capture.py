"""capture(): lower a model to ATen with torch.export (make_fx as fallback) and write a repro dir
holding the graph, the real parameters, buffers and inputs, and the eager outputs."""
from __future__ import annotations

import copy
import json
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .host_ops import describe_graphs
from .serialize import CaptureError, graph_to_json, write_repro_dir

PRODUCER = "parity_capture 0.1"


def _keystr(path) -> str:
    """('logits',) -> "logits"; (0, 'hidden') -> "0.hidden"; () -> "output"."""
    parts = []
    for k in path:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return ".".join(parts) or "output"


def flatten_outputs(out: Any) -> Tuple[List[str], List[Any]]:
    """Flattens a model output (tensors, tuples, dicts, HF ModelOutputs) to named leaves."""
    leaves, _ = pytree.tree_flatten_with_path(out)
    return [_keystr(p) for p, _ in leaves], [v for _, v in leaves]


def _input_specs(ep) -> List[Any]:
    return list(ep.graph_signature.input_specs)


def _export(model: torch.nn.Module, args: Tuple, kwargs: Dict[str, Any]):
    ep = torch.export.export(model, args, kwargs=kwargs, strict=False)
    return ep.run_decompositions({})


def _graph_entry(name: str, inputs: Dict[str, str], outputs: List[str], output_names: List[str]) -> Dict[str, Any]:
    return {"name": name, "file": f"graphs/{name}.json", "inputs": inputs,
            "expected_outputs": outputs, "output_names": output_names}


def lower_exported(ep, name: str, eager_leaves: Sequence[Any], eager_names: Sequence[str],
                   user_inputs: Sequence[torch.Tensor], input_attrs: Optional[Dict[int, str]] = None,
                   ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """Returns (graph_json, manifest_entry, tensors) for one ExportedProgram. `input_attrs` maps
    the position of a tensor user input to a tensor key (`param/<fqn>`, `buffer/<fqn>`): that
    input is a parameter or buffer the program passed in (dynamo lifts them to inputs) and
    becomes a get_attr of that key."""
    from torch.export.graph_signature import InputKind, OutputKind

    attr_keys: Dict[str, str] = {}
    tensors: Dict[str, torch.Tensor] = {}
    inputs: Dict[str, str] = {}
    input_attrs = input_attrs or {}
    position = 0
    for spec in _input_specs(ep):
        ph = spec.arg.name if hasattr(spec.arg, "name") else None
        if spec.kind == InputKind.USER_INPUT:
            if not isinstance(spec.arg, torch.export.graph_signature.TensorArgument):
                continue  # a constant (int, None) export specialized into the graph
            value = user_inputs[position]
            if position in input_attrs:
                attr_keys[ph] = input_attrs[position]
                tensors[input_attrs[position]] = value
            else:
                inputs[ph] = f"{name}/input/{ph}"
                tensors[inputs[ph]] = value
            position += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            prefix = {InputKind.PARAMETER: "param", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "const"}[spec.kind]
            key = f"{prefix}/{spec.target}"
            attr_keys[ph] = key
            value = ep.state_dict.get(spec.target) if spec.target in ep.state_dict else ep.constants[spec.target]
            tensors[key] = value
        else:
            raise CaptureError(f"input {ph}: input kind {spec.kind} is not supported")
    gjson = graph_to_json(ep.graph_module, name, attr_keys)
    out_keys, out_names = [], []
    user_out = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    tensor_leaves = [(n, v) for n, v in zip(eager_names, eager_leaves) if isinstance(v, torch.Tensor)]
    graph_outputs = [s for s in user_out if isinstance(s.arg, torch.export.graph_signature.TensorArgument)]
    if len(graph_outputs) != len(tensor_leaves):
        raise CaptureError(f"graph returns {len(graph_outputs)} tensors but eager returned {len(tensor_leaves)}")
    # The graph's output node must list exactly the user tensor outputs, in order.
    names = [s.arg.name for s in graph_outputs]
    for node in gjson["nodes"]:
        if node["op"] == "output":
            node["args"] = [[{"node": n} for n in names]]
    for k, (oname, value) in enumerate(tensor_leaves):
        key = f"{name}/output/{k}"
        out_keys.append(key)
        out_names.append(oname)
        tensors[key] = value
    return gjson, _graph_entry(name, inputs, out_keys, out_names), tensors


class WithLoss(torch.nn.Module):
    """model followed by its training loss: returns (loss, outputs)."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[[Any], torch.Tensor]):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        return self.loss_fn(out), out


def _run_eager(model, args, kwargs, mode: str):
    if mode == "train":
        return model(*args, **kwargs)
    with torch.no_grad():
        return model(*args, **kwargs)


def capture(model: torch.nn.Module, example_inputs: Sequence[Any], out_dir: str, *, mode: str = "eval",
            name: Optional[str] = None, example_kwargs: Optional[Dict[str, Any]] = None,
            method: str = "export", extra_manifest: Optional[Dict[str, Any]] = None,
            loss_fn: Optional[Callable[[Any], torch.Tensor]] = None,
            autocast: Optional[torch.dtype] = None, imports: Sequence[str] = (),
            dynamic_shapes: Optional[Sequence[Any]] = None) -> str:
    """Captures `model(*example_inputs, **example_kwargs)` into the repro dir `out_dir`.

    method: "export" (torch.export, falling back to make_fx on failure) or "make_fx".
    mode "train" needs `loss_fn(outputs) -> scalar`: the captured graph returns (loss, *outputs)
    so a backend's loss, gradients and optimizer step can be checked.
    autocast: capture under torch.autocast with this dtype (AMP); the graph then holds the
    casts explicitly, so every backend and parity's interpreter run the same mixed precision.
    imports: modules that register the graph's non-ATen ops when capture cannot find them itself
    (recorded in the manifest's host_ops; docs/format.md).
    dynamic_shapes: one entry per positional input, None or {dim: torch.export.Dim(name, min=,
    max=) or None}: those dims are symbolic (eval only). The graph is recorded as dynamo compiles
    it then (the dump backend, fullgraph), with the symbols' ranges and guards (docs/format.md).
    """
    if dynamic_shapes is not None:
        return _capture_dynamic(model, tuple(example_inputs), out_dir, dynamic_shapes, mode=mode, name=name,
                                example_kwargs=example_kwargs, extra_manifest=extra_manifest, imports=imports)
    if autocast is not None:
        device_type = next((x.device.type for x in pytree.tree_leaves((example_inputs, example_kwargs))
                            if isinstance(x, torch.Tensor)), "cpu")
        with torch.autocast(device_type=device_type, dtype=autocast):
            return capture(model, example_inputs, out_dir, mode=mode, name=name, example_kwargs=example_kwargs,
                           method=method, extra_manifest=dict(extra_manifest or {}, amp=str(autocast).removeprefix("torch.")),
                           loss_fn=loss_fn, imports=imports)
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', got {mode!r}")
    if mode == "train":
        if loss_fn is None:
            raise ValueError("mode='train' needs loss_fn")
        model = WithLoss(model, loss_fn)
    model.train(mode == "train")
    args = tuple(example_inputs)
    kwargs = dict(example_kwargs or {})
    eager = _run_eager(model, args, kwargs, mode)
    eager_names, eager_leaves = flatten_outputs(eager)
    if mode == "train":  # (loss, outputs): "0" -> "loss", "1.logits" -> "logits"
        eager_names = ["loss" if n == "0" else (n[2:] if n.startswith("1.") else "output") for n in eager_names]
    flat_inputs = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    gname = "graph_0"
    producer = PRODUCER
    lowered = None
    if method == "export":
        try:
            ep = _export(model, args, kwargs)
            lowered = lower_exported(ep, gname, eager_leaves, eager_names, flat_inputs)
            producer += " (torch.export)"
        except CaptureError:
            raise
        except Exception as e:  # export failed: fall back to make_fx below
            export_error = e
    if lowered is None:
        lowered = _lower_make_fx(model, args, kwargs, gname, eager_leaves, eager_names, mode)
        producer += " (make_fx)"
    gjson, entry, tensors = lowered
    dtypes = {str(v.dtype).removeprefix("torch.") for v in tensors.values() if v.is_floating_point()}
    devices = {str(v.device.type) for v in tensors.values()}
    manifest = {
        "torch_version": torch.__version__,
        "producer": producer,
        "model": name or type(getattr(model, "model", model)).__name__,
        "mode": mode,
        "dtype": "float32" if "float32" in dtypes or not dtypes else sorted(dtypes)[0],
        "device": sorted(devices)[0] if devices else "cpu",
    }
    host = describe_graphs([gjson], imports)
    if host:
        manifest["host_ops"] = host
    manifest.update(extra_manifest or {})
    return write_repro_dir(out_dir, manifest, [(gjson, entry)], tensors)


def _capture_dynamic(model, args, out_dir, dynamic_shapes, *, mode, name, example_kwargs, extra_manifest, imports) -> str:
    """capture() with symbolic dims: each named dim marked dynamic (with its Dim's range), the
    model compiled whole with the dump backend and called once."""
    from .dynamo_backend import dump_backend
    if mode != "eval":
        raise ValueError("dynamic_shapes: symbolic graphs are captured in eval mode only")
    if len(dynamic_shapes) != len(args):
        raise ValueError(f"dynamic_shapes has {len(dynamic_shapes)} entries, the model takes {len(args)} inputs")
    args = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
    for k, (a, dims) in enumerate(zip(args, dynamic_shapes)):
        if not dims:
            continue
        if not isinstance(a, torch.Tensor):
            raise ValueError(f"dynamic_shapes[{k}]: input {k} is not a tensor")
        for dim, spec in dims.items():
            lo, hi = getattr(spec, "min", None), getattr(spec, "max", None)
            hi = None if hi is None or hi >= 2 ** 62 else hi  # torch.export.Dim's "unbounded"
            kw = {k2: v for k2, v in (("min", lo), ("max", hi)) if v is not None}
            torch._dynamo.mark_dynamic(a, dim, **kw)
    model.eval()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=dump_backend(out_dir, name or type(model).__name__, imports=imports),
                                 fullgraph=True)
        with torch.no_grad():
            compiled(*args, **dict(example_kwargs or {}))
    finally:
        torch._dynamo.reset()
    if extra_manifest:
        path = os.path.join(out_dir, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        manifest.update(extra_manifest)
        with open(path + ".tmp", "w") as f:
            json.dump(manifest, f, indent=2)
        os.replace(path + ".tmp", path)
    return out_dir


def _lower_make_fx(model, args, kwargs, gname, eager_leaves, eager_names, mode, input_attrs=None, values=None):
    """make_fx over a functional call with parameters and buffers as explicit inputs. `values`:
    the tensor inputs' values to record (default: the traced ones)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.func import functional_call, functionalize

    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    keys = list(named.keys())
    flat_args, spec = pytree.tree_flatten((args, kwargs))
    tensor_pos = [i for i, a in enumerate(flat_args) if isinstance(a, torch.Tensor)]

    def fn(*flat):
        state = dict(zip(keys, flat[: len(keys)]))
        leaves = list(flat_args)
        for pos, v in zip(tensor_pos, flat[len(keys):]):
            leaves[pos] = v
        a, kw = pytree.tree_unflatten(leaves, spec)
        out = functional_call(model, state, a, kw)
        return [v for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor)]

    real = [named[k] for k in keys] + [flat_args[i] for i in tensor_pos]
    ctx = torch.no_grad() if mode == "eval" else torch.enable_grad()
    with ctx:
        gm = make_fx(functionalize(fn, remove="mutations_and_views"), tracing_mode="real")(*real)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    attr_keys, tensors, inputs = {}, {}, {}
    for n, k in zip(placeholders[: len(keys)], keys):
        kind = "param" if k in dict(model.named_parameters()) else "buffer"
        attr_keys[n.name] = f"{kind}/{k}"
        tensors[f"{kind}/{k}"] = named[k]
    recorded = list(values) if values is not None else real[len(keys):]
    for position, (n, v) in enumerate(zip(placeholders[len(keys):], recorded)):
        if input_attrs and position in input_attrs:
            attr_keys[n.name] = input_attrs[position]
            tensors[input_attrs[position]] = v
        else:
            inputs[n.name] = f"{gname}/input/{n.name}"
            tensors[inputs[n.name]] = v
    gjson = graph_to_json(gm, gname, attr_keys)
    out_keys, out_names = [], []
    k = 0
    for oname, value in zip(eager_names, eager_leaves):
        if isinstance(value, torch.Tensor):
            out_keys.append(f"{gname}/output/{k}")
            out_names.append(oname)
            tensors[out_keys[-1]] = value
            k += 1
    return gjson, _graph_entry(gname, inputs, out_keys, out_names), tensors


def capture_graph_module(gm: fx.GraphModule, inputs: Sequence[Any], name: str, outputs: Any = None,
                         input_attrs: Optional[Dict[int, str]] = None, values: Optional[Sequence[Any]] = None,
                         ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """Lowers one dynamo graph (torch-level FX, parameters lifted to inputs) to ATen.

    `inputs`: what torch.export traces with (fake-ified: never written to). `values`: the input
    values to record (default `inputs`); make_fx, the fallback, runs real ops, so it traces
    copies of them on the inputs' devices. `outputs`: the graph's outputs on those values
    (default: gm run on copies). `input_attrs`: tensor-input position -> tensor key, for inputs
    that are the program's parameters and buffers (lower_exported).
    Returns (graph_json, manifest_entry, tensors) for write_repro_dir."""
    values = list(inputs if values is None else values)

    def copies():
        return [v.detach().to(x.device, copy=True) if isinstance(v, torch.Tensor) else x for v, x in zip(values, inputs)]

    if outputs is None:
        with torch.no_grad():
            outputs = gm(*copies())
    names, leaves = flatten_outputs(outputs)
    tensor_values = [x for x in values if isinstance(x, torch.Tensor)]
    try:
        ep = torch.export.export(gm, tuple(inputs), strict=False).run_decompositions({})
        return lower_exported(ep, name, leaves, names, tensor_values, input_attrs)
    except CaptureError:
        raise
    except Exception:
        return _lower_make_fx(gm, tuple(copies()), {}, name, leaves, names, "eval", input_attrs, tensor_values)


def aot_inference_graph(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> fx.GraphModule:
    """The ATen graph AOTAutograd hands a backend for `gm` (dynamo's graph, traced with its fake,
    possibly symbolic, example inputs): functionalized, SymInt inputs and size arithmetic kept.
    Traced without grad: the forward as inference (a train run differentiates it itself)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    captured: Dict[str, fx.GraphModule] = {}

    def fw_compiler(g, _inputs):
        captured["gm"] = g
        return g

    with torch.no_grad():
        aot_module_simplified(gm, list(example_inputs), fw_compiler=fw_compiler)
    if "gm" not in captured:
        raise CaptureError("AOTAutograd compiled no graph")
    return captured["gm"]


def capture_symbolic_graph(aten: fx.GraphModule, shape_env, name: str, values: Sequence[Any], outputs: Any,
                           input_attrs: Optional[Dict[int, str]] = None
                           ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """A symbolic graph (aot_inference_graph of a dynamo graph with dynamic shapes) with the values
    of the recorded call: `values` its inputs (tensors, and ints for its size inputs), `outputs`
    what it returned. The symbols take their values in this call; the graph keeps its size inputs
    and arithmetic, so it replays at any shape its ranges and guards allow."""
    from .serialize import _is_sym, symbolic_facts
    placeholders = [n for n in aten.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(values):
        raise CaptureError(f"the symbolic graph takes {len(placeholders)} inputs, the call gave {len(values)}")
    bindings: Dict[str, int] = {}
    for n, v in zip(placeholders, values):
        val = n.meta.get("val")
        if isinstance(v, torch.Tensor) and isinstance(val, torch.Tensor):
            for d, s in enumerate(val.shape):
                if _is_sym(s) and s.node.expr.is_Symbol:
                    bindings.setdefault(str(s.node.expr), int(v.shape[d]))
        elif _is_sym(val) and val.node.expr.is_Symbol and isinstance(v, (int, float, bool)):
            bindings.setdefault(str(val.node.expr), int(v))
    facts = symbolic_facts(aten, shape_env, bindings)
    attr_keys: Dict[str, str] = {}
    inputs: Dict[str, str] = {}
    tensors: Dict[str, torch.Tensor] = {}
    position = 0
    for n, v in zip(placeholders, values):
        if not isinstance(v, torch.Tensor):
            continue  # a size input: bound from the symbols at replay
        key = (input_attrs or {}).get(position)
        if key is not None:
            attr_keys[n.name] = key
            tensors[key] = v
        else:
            inputs[n.name] = f"{name}/input/{n.name}"
            tensors[inputs[n.name]] = v
        position += 1
    gjson = graph_to_json(aten, name, attr_keys, facts)
    # The graph returns the tensors the call returned (sizes it also returns are the symbols').
    out_node = next(n for n in gjson["nodes"] if n["op"] == "output")
    out_fx = next(n for n in aten.graph.nodes if n.op == "output")
    returned = out_fx.args[0] if isinstance(out_fx.args[0], (list, tuple)) else [out_fx.args[0]]
    keep = [r.name for r in returned if isinstance(r, fx.Node) and isinstance(r.meta.get("val"), torch.Tensor)]
    out_node["args"] = [[{"node": k} for k in keep]]
    names, leaves = flatten_outputs(outputs)
    tensor_leaves = [(n, v) for n, v in zip(names, leaves) if isinstance(v, torch.Tensor)]
    if len(tensor_leaves) != len(keep):
        raise CaptureError(f"the symbolic graph returns {len(keep)} tensors but the call returned {len(tensor_leaves)}")
    out_keys, out_names = [], []
    for k, (oname, value) in enumerate(tensor_leaves):
        out_keys.append(f"{name}/output/{k}")
        out_names.append(oname)
        tensors[out_keys[-1]] = value
    return gjson, _graph_entry(name, inputs, out_keys, out_names), tensors
