"""Lowering to the repro-dir format: a model, an ExportedProgram or a dynamo graph (static or
symbolic) to (graph JSON, manifest entry, tensors). What capture() and the dump backend both
use; neither imports the other for it."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from . import checkpointed
from .serialize import CaptureError, graph_to_json
from .standalone import as_output, graph_from_json, on_device, placeholder_values

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


def _graph_entry(name: str, inputs: Dict[str, str], outputs: List[str], output_names: List[str]) -> Dict[str, Any]:
    return {"name": name, "file": f"graphs/{name}.json", "inputs": inputs,
            "expected_outputs": outputs, "output_names": output_names}


def lower_exported(ep, name: str, eager_leaves: Sequence[Any], eager_names: Sequence[str],
                   user_inputs: Sequence[torch.Tensor], input_attrs: Optional[Dict[int, str]] = None,
                   inputs_after: Optional[Sequence[torch.Tensor]] = None,
                   attr_after: Optional[Callable[[str], torch.Tensor]] = None,
                   attrs_before: Optional[Dict[str, torch.Tensor]] = None,
                   ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """Returns (graph_json, manifest_entry, tensors) for one ExportedProgram. `input_attrs` maps
    the position of a tensor user input to a tensor key (`param/<fqn>`, `buffer/<fqn>`): that
    input is a parameter or buffer the program passed in (dynamo lifts them to inputs) and
    becomes a get_attr of that key. `inputs_after`: the tensor user inputs' values after the
    program's call; an input the graph writes in place (an optimizer step's parameters and
    state, a running statistic, a cache) becomes an output named `mutated/<key>` holding its new
    value, compared as every output is (the recorded graph is functional: it returns new values
    instead of writing its inputs). `attr_after(target)`: likewise for the module's own
    parameters and buffers (dynamo keeps an optimizer's parameters and state as attributes of
    its graph); without it, writes to them are not recorded (capture(): the model's buffers).
    `attrs_before`: those attributes' values before the call, recorded as the graph's inputs
    (the ExportedProgram's state_dict holds them as they are now)."""
    from torch.export.graph_signature import InputKind, OutputKind

    attr_keys: Dict[str, str] = {}
    tensors: Dict[str, torch.Tensor] = {}
    inputs: Dict[str, str] = {}
    input_attrs = input_attrs or {}
    position = 0
    user_position: Dict[str, int] = {}  # placeholder -> position among the tensor user inputs
    for spec in _input_specs(ep):
        ph = spec.arg.name if hasattr(spec.arg, "name") else None
        if spec.kind == InputKind.USER_INPUT:
            if not isinstance(spec.arg, torch.export.graph_signature.TensorArgument):
                continue  # a constant (int, None) export specialized into the graph
            value = user_inputs[position]
            user_position[ph] = position
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
            if attrs_before is not None and spec.target in attrs_before:
                value = attrs_before[spec.target]
            else:
                value = ep.state_dict.get(spec.target) if spec.target in ep.state_dict else ep.constants[spec.target]
            tensors[key] = value
        else:
            raise CaptureError(f"input {ph}: input kind {spec.kind} is not supported")
    # export's decomposed graph is functional too: its views may be reshapes (_views_as_reshapes)
    gjson = graph_to_json(_views_as_reshapes(ep.graph_module), name, attr_keys, _exported_symbols(ep, attr_keys, tensors, inputs))
    out_keys, out_names = [], []
    user_out = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    computed = [(s.arg.name, n, v) for s, n, v in zip(user_out, eager_names, eager_leaves)
                if not isinstance(s.arg, torch.export.graph_signature.ConstantArgument)]
    if len(user_out) != len(eager_leaves) or any(not isinstance(v, (torch.Tensor, int, float, bool)) for _, _, v in computed):
        raise CaptureError(f"graph returns {len(user_out)} values but eager returned {len(eager_leaves)}")
    # The graph's outputs: every tensor and every number a node computes (a constant the code
    # returns is no output of the graph).
    names = [node for node, _, _ in computed]
    outputs = [(n, v) for _, n, v in computed]
    for s in ep.graph_signature.output_specs:
        if s.kind == OutputKind.USER_INPUT_MUTATION and inputs_after is not None:
            pos = user_position[s.target]
            key, value = input_attrs.get(pos) or inputs[s.target], inputs_after[pos]
        elif s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION) and attr_after is not None:
            key = f"{'param' if s.kind == OutputKind.PARAMETER_MUTATION else 'buffer'}/{s.target}"
            key = key if key in tensors else next(k for k in tensors if k.endswith("/" + s.target))
            value = attr_after(s.target)
        else:
            continue
        names.append(s.arg.name)
        outputs.append((f"mutated/{key}", value))
    # The graph's output node lists the user tensor outputs, in order, then the written inputs.
    for node in gjson["nodes"]:
        if node["op"] == "output":
            node["args"] = [[{"node": n} for n in names]]
    for k, (oname, value) in enumerate(outputs):
        key = f"{name}/output/{k}"
        out_keys.append(key)
        out_names.append(oname)
        tensors[key] = as_output(value)
    return gjson, _graph_entry(name, inputs, out_keys, out_names), tensors


def _exported_symbols(ep, attr_keys: Dict[str, str], tensors: Dict[str, torch.Tensor],
                      inputs: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """An exported graph that makes values from data (`.item()`, `nonzero`: unbacked symbols)
    declares them with the values they took on the recorded tensors (the graph run once on
    them); None for a graph without them."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    from .serialize import symbolic_facts
    gm = ep.graph_module
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op != "output"]
    if not any(free_unbacked_symbols(v) for v in vals if v is not None):
        return None
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    shape_env = mode.shape_env if mode is not None else None
    if shape_env is None:
        raise CaptureError("the graph makes values from data but carries no ShapeEnv")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [tensors[attr_keys[n.name]] if n.name in attr_keys else tensors[inputs[n.name]] if n.name in inputs else None
              for n in placeholders]
    if any(v is None for v in values):
        raise CaptureError("the graph makes values from data and takes inputs that are not tensors")
    return symbolic_facts(gm, shape_env, unbacked_values(gm, values))


def lower_make_fx(model, args, kwargs, gname, eager_leaves, eager_names, mode, input_attrs=None, values=None,
                  attrs_before=None):
    """make_fx over a functional call with parameters and buffers as explicit inputs. `values`:
    the tensor inputs' values to record (default: the traced ones); `attrs_before`: parameters'
    and buffers' values to record by name (default: as they are now)."""
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
    fixed = False
    with ctx:
        try:
            gm = make_fx(functionalize(fn, remove="mutations_and_views"), tracing_mode="real")(*real)
        except RuntimeError as e:
            if "get value out of a tracing tensor" in str(e):
                # The code reads a value out of a tensor (a Python branch on torch.equal, `.item()`
                # checked in Python): traced on these real values, that value is a constant of
                # the graph, as the call took it; the entry says so.
                gm = make_fx(functionalize(fn, remove="mutations_and_views"), tracing_mode="real",
                             _error_on_data_dependent_ops=False)(*real)
                fixed = True
            elif "data is not allocated yet" in str(e):
                # An op's C++ code reads a tensor argument's data (tensor_split by a tensor of
                # indices), which functionalization's wrappers do not hold: traced unwrapped,
                # the graph keeps the ops as they ran, in-place ones included.
                gm = make_fx(fn, tracing_mode="real")(*real)
            else:
                raise
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    attr_keys, tensors, inputs = {}, {}, {}
    for n, k in zip(placeholders[: len(keys)], keys):
        kind = "param" if k in dict(model.named_parameters()) else "buffer"
        attr_keys[n.name] = f"{kind}/{k}"
        tensors[f"{kind}/{k}"] = (attrs_before or {}).get(k, named[k])
    recorded = list(values) if values is not None else real[len(keys):]
    for position, (n, v) in enumerate(zip(placeholders[len(keys):], recorded)):
        if input_attrs and position in input_attrs:
            attr_keys[n.name] = input_attrs[position]
            tensors[input_attrs[position]] = v
        else:
            inputs[n.name] = f"{gname}/input/{n.name}"
            tensors[inputs[n.name]] = v
    record_constants(gm, gname, attr_keys, tensors)
    gjson = graph_to_json(gm, gname, attr_keys)
    out_keys, out_names = [], []
    k = 0
    for oname, value in zip(eager_names, eager_leaves):
        if isinstance(value, torch.Tensor):
            out_keys.append(f"{gname}/output/{k}")
            out_names.append(oname)
            tensors[out_keys[-1]] = value
            k += 1
    entry = _graph_entry(gname, inputs, out_keys, out_names)
    if fixed:
        entry["note"] = ("values the code read out of tensors while tracing (a branch on data, .item()) are constants "
                         "of this graph, as the recorded call took them")
    return gjson, entry, tensors


def snapshot_attrs(gm: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """gm's parameters and buffers as they are now, copied to the CPU (before a call that may
    write them: a compiled optimizer step keeps the parameters and state it updates there)."""
    with torch.no_grad():
        return {k: v.detach().to("cpu", copy=True)
                for k, v in list(gm.named_parameters(remove_duplicate=False)) + list(gm.named_buffers(remove_duplicate=False))}


def record_constants(gm: fx.GraphModule, name: str, attr_keys: Dict[str, str], tensors: Dict[str, torch.Tensor]) -> None:
    """Tensors the traced code made from Python values (torch.tensor(...), a mask constant) are
    attributes of the traced module (get_attr nodes): recorded as graph `name`'s constants."""
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.name not in attr_keys:
            value = getattr(gm, n.target)
            if isinstance(value, torch.Tensor):
                attr_keys[n.name] = f"const/{name}/{n.target}"
                tensors[attr_keys[n.name]] = value.detach()


def capture_graph_module(gm: fx.GraphModule, inputs: Sequence[Any], name: str, outputs: Any = None,
                         input_attrs: Optional[Dict[int, str]] = None, values: Optional[Sequence[Any]] = None,
                         attrs_before: Optional[Dict[str, torch.Tensor]] = None,
                         ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """Lowers one dynamo graph (torch-level FX, parameters lifted to inputs) to ATen.

    `inputs`: what torch.export traces with (fake-ified: never written to; a graph that writes
    its inputs in place is recorded with their values here as outputs). `values`: the input
    values to record (default `inputs`); make_fx, the fallback, runs real ops, so it traces
    copies of them on the inputs' devices. `outputs`: the graph's outputs on those values
    (default: gm run on copies). `input_attrs`: tensor-input position -> tensor key, for inputs
    that are the program's parameters and buffers (lower_exported). `attrs_before`: gm's own
    parameters and buffers before the call (snapshot_attrs), when the call may have written them.
    Returns (graph_json, manifest_entry, tensors) for write_repro_dir."""
    values = list(inputs if values is None else values)
    gm = checkpointed.as_marked_calls(gm)  # kept as checkpoint calls through every lowering

    def copies():
        return [v.detach().to(x.device, copy=True) if isinstance(v, torch.Tensor) else x for v, x in zip(values, inputs)]

    if outputs is None:
        with torch.no_grad():
            outputs = gm(*copies())
    names, leaves = flatten_outputs(outputs)
    tensor_values = [x for x in values if isinstance(x, torch.Tensor)]
    # Under autocast, torch.export keeps composite ops (einsum, tensordot, ...) whole and loses
    # the casts autocast made inside them; AOTAutograd traces the ops that ran, casts included,
    # functionalized, as a torch.compile backend receives them. make_fx is the last resort. A
    # lowering whose outputs differ in dtype or shape from the program's is not taken.
    def aot():
        return capture_symbolic_graph(aot_inference_graph(gm, copies()), None, name, values, outputs, input_attrs)

    def export():
        ep = torch.export.export(gm, tuple(inputs), strict=False).run_decompositions({})
        after = [x.detach().to("cpu", copy=True) for x in inputs if isinstance(x, torch.Tensor)]
        return lower_exported(ep, name, leaves, names, tensor_values, input_attrs, after,
                              lambda target: gm.get_parameter(target).detach().to("cpu", copy=True)
                              if target in dict(gm.named_parameters()) else gm.get_buffer(target).detach().to("cpu", copy=True),
                              attrs_before)

    def fx_trace():
        return lower_make_fx(gm, tuple(copies()), {}, name, leaves, names, "eval", input_attrs, tensor_values)

    # A graph of torch.func transforms (vmap, grad inside the compiled code): torch.export fails
    # on it, or traces grad's result as zeros; AOTAutograd flattens it as it does for a backend.
    lowerings = [aot, fx_trace] if _autocast_active(inputs) or _calls_transforms(gm) else [export, fx_trace]
    why = ""
    for k, lower in enumerate(lowerings):
        try:
            with transform_state_kept():
                lowered = lower()
        except Exception:  # the next lowering may record it (make_fx: data-dependent sizes are concrete)
            if k == len(lowerings) - 1:
                raise
            continue
        why = output_mismatch(lowered)
        if why is None:
            return lowered
    raise CaptureError(f"the lowered graph does not compute what the program did: {why}")


@contextlib.contextmanager
def transform_state_kept():
    """A trace that fails part-way through a graph of torch.func transforms leaves their levels
    pushed (functorch's and forward-mode AD's) and saved-tensor hooks off, and every tensor op after it (the next lowering, the
    program's own) would run inside them: undone on the way out, as dynamo undoes it for a frame
    that fails."""
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    hooks = torch._C._autograd._saved_tensors_hooks_is_enabled()
    dual = _dual_level_active()  # jvp, jacfwd, hessian: forward-mode AD's level
    try:
        yield
    except BaseException:
        torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
        if not dual and _dual_level_active():
            torch._C._exit_dual_level(level=0)  # forward-mode AD has one level at most: 0
        torch._C._functorch.set_inplace_requires_grad_allowed(False)
        if hooks and not torch._C._autograd._saved_tensors_hooks_is_enabled():
            torch._C._autograd._saved_tensors_hooks_enable()
        raise


def _dual_level_active() -> bool:
    """Whether a forward-mode AD level is entered (torch has no query: entering one fails then)."""
    try:
        level = torch._C._enter_dual_level()
    except RuntimeError:
        return True
    torch._C._exit_dual_level(level=level)
    return False


def _calls_transforms(gm: fx.GraphModule) -> bool:
    """Whether dynamo's graph runs torch.func transforms itself (their level bookkeeping calls)."""
    return any(n.op == "call_function" and (getattr(n.target, "__module__", None) or "").startswith(("torch._functorch", "torch._C._functorch"))
               for n in gm.graph.nodes)


def _autocast_active(inputs: Sequence[Any]) -> bool:
    devices = {x.device.type for x in inputs if isinstance(x, torch.Tensor)} | {"cpu"}
    return any(torch.is_autocast_enabled(d) for d in devices if d in ("cpu", "cuda", "xpu", "mps", "hpu"))


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
    fact parity's interpreter asks, interpreter/program.cpp), unless it takes a dropout_p that is 0
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


def replay_mismatch(gjson: Dict[str, Any], entry: Dict[str, Any], tensors: Dict[str, torch.Tensor],
                    device: str = "cpu") -> Optional[str]:
    """Runs the recorded graph (as repro.py reads it back) on its recorded inputs and says where
    a floating output leaves what the program got by more than rounding does (relative RMS error
    above 1e-2; 5e-2 in 16-bit dtypes, and NaN/inf where the program had none); None when every
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
    for k, (got, key) in enumerate(zip(out, entry["expected_outputs"])):
        want = tensors[key]
        if not isinstance(got, torch.Tensor) or not want.is_floating_point() or got.shape != want.shape:
            continue
        a, b = got.detach().to("cpu", torch.float64), want.to(torch.float64)
        if not torch.equal(a.isfinite(), b.isfinite()):
            return f"output {k} ({entry.get('output_names', [None] * (k + 1))[k] or k}): non-finite values where the program had finite ones or the reverse"
        finite = b.isfinite()
        diff = (a[finite] - b[finite]).norm() / (b[finite].norm() + 1e-12)
        limit = 5e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-2
        if diff > limit:
            return f"output {k}: relative RMS difference {float(diff):.3g} from the program's value"
    return None


def aot_inference_graph(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> fx.GraphModule:
    """The ATen graph AOTAutograd hands a backend for `gm` (dynamo's graph, traced with its fake,
    possibly symbolic, example inputs): functionalized, SymInt inputs and size arithmetic kept.
    Traced without grad: the forward as inference (a train run differentiates it itself)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    captured: Dict[str, fx.GraphModule] = {}

    def fw_compiler(g, _inputs):
        captured["gm"] = g
        return g

    # Without grad, unless the graph runs torch.func transforms itself: grad and jacrev trace only
    # with it (the inputs are detached copies: the graph is an inference graph either way).
    with torch.enable_grad() if _calls_transforms(gm) else torch.no_grad():
        aot_module_simplified(checkpointed.as_marked_calls(gm), list(example_inputs), fw_compiler=fw_compiler)
    if "gm" not in captured:
        raise CaptureError("AOTAutograd compiled no graph")
    return _views_as_reshapes(captured["gm"])


def _views_as_reshapes(gm: fx.GraphModule) -> fx.GraphModule:
    """AOTAutograd's and torch.export's decomposed graphs are functional (no op writes through a
    view), so each `view` may be a `reshape`: the same values wherever the view was legal, and
    still legal when a replay lays an intermediate out otherwise than the traced call did (inputs
    stored contiguous, another backend's choice of output strides: Inductor folds a `cat` of a
    transposed tensor and an empty one into the transposed tensor, whose `view` it then refuses,
    where the program's code said `reshape`)."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten.view.default:
            n.target = torch.ops.aten.reshape.default
    gm.recompile()
    return gm


def unbacked_values(aten: fx.GraphModule, inputs: Sequence[Any]) -> Dict[str, Any]:
    """The values the graph's data-dependent symbols (unbacked: u0 from `.item()`, the size of
    `nonzero`'s result) take when it runs on `inputs` (real values, on the devices the graph
    expects): the graph run once, each node whose metadata is such a symbol, or a tensor with
    such a symbol as a dim, read."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    if not any(free_unbacked_symbols(n.meta.get("val")) for n in aten.graph.nodes if n.op != "output"):
        return {}
    found: Dict[str, Any] = {}

    def read(val, real):
        if isinstance(val, (list, tuple)) and isinstance(real, (list, tuple)):
            for v, r in zip(val, real):
                read(v, r)
        elif isinstance(val, torch.Tensor) and isinstance(real, torch.Tensor):
            for d, r in zip(list(val.shape) + list(val.stride()), list(real.shape) + list(real.stride())):
                read(d, r)
        elif isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and val.node.expr.is_Symbol:
            found.setdefault(str(val.node.expr), real.item() if isinstance(real, torch.Tensor) else real)

    class Reader(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            read(n.meta.get("val"), out)
            return out

    with torch.no_grad():
        Reader(aten).run(*inputs)
    return found


def capture_symbolic_graph(aten: fx.GraphModule, shape_env, name: str, values: Sequence[Any], outputs: Any,
                           input_attrs: Optional[Dict[int, str]] = None, unbacked: Optional[Dict[str, Any]] = None,
                           ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, torch.Tensor]]:
    """An AOTAutograd graph (aot_inference_graph of a dynamo graph: symbolic with the ShapeEnv of
    its dynamic shapes, or static with `shape_env` None) with the values of the recorded call: `values` its inputs (tensors, and ints for its size inputs), `outputs`
    what it returned. The symbols take their values in this call; the graph keeps its size inputs
    and arithmetic, so it replays at any shape its ranges and guards allow. `unbacked`: the
    values its data-dependent symbols took in the call (unbacked_values)."""
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
    bindings.update(unbacked or {})
    facts = symbolic_facts(aten, shape_env, bindings) if shape_env is not None else None
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
    record_constants(aten, name, attr_keys, tensors)
    gjson = graph_to_json(aten, name, attr_keys, facts)
    # The graph returns what the call returned: its tensors and the numbers its nodes compute
    # (sizes, `.item()`); a constant it returns is no output of the graph.
    out_node = next(n for n in gjson["nodes"] if n["op"] == "output")
    out_fx = next(n for n in aten.graph.nodes if n.op == "output")
    returned = out_fx.args[0] if isinstance(out_fx.args[0], (list, tuple)) else [out_fx.args[0]]
    names, leaves = flatten_outputs(outputs)
    if len(returned) != len(leaves):
        raise CaptureError(f"the symbolic graph returns {len(returned)} values but the call returned {len(leaves)}")
    kept = [(r.name, n, v) for r, n, v in zip(returned, names, leaves)
            if isinstance(r, fx.Node) and isinstance(r.meta.get("val"), (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))]
    out_node["args"] = [[{"node": node} for node, _, _ in kept]]
    out_keys, out_names = [], []
    for k, (_, oname, value) in enumerate(kept):
        out_keys.append(f"{name}/output/{k}")
        out_names.append(oname)
        tensors[out_keys[-1]] = as_output(value)
    return gjson, _graph_entry(name, inputs, out_keys, out_names), tensors
