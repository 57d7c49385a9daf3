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
from .errors import CaptureError
from .serialize import graph_to_json
from .lowered import _graph_entry, flatten_outputs, record_constants, written_inputs
from .replay_check import output_mismatch
from .standalone_graph import as_output
from .symbolic_lowering import capture_symbolic_graph, unbacked_values


def _input_specs(ep) -> List[Any]:
    return list(ep.graph_signature.input_specs)


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
    program's call (live: only the written ones are copied); an input the graph writes in place (an optimizer step's parameters and
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
            key, value = input_attrs.get(pos) or inputs[s.target], inputs_after[pos].detach().to("cpu", copy=True)
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
                  attrs_before=None, inputs_after=None):
    """make_fx over a functional call with parameters and buffers as explicit inputs. `values`:
    the tensor inputs' values to record (default: the traced ones); `attrs_before`: parameters'
    and buffers' values to record by name (default: as they are now). `inputs_after`: the tensor
    inputs' values after the program's call (live: only the written ones are copied); with it the inputs are traced as copies (the call's
    writes land on those), and an input the graph writes in place becomes an output
    `mutated/<key>` holding its new value, as lower_exported records it."""
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

    user = [flat_args[i] for i in tensor_pos]
    if inputs_after is not None:
        user = [t.detach().clone().requires_grad_(t.requires_grad) for t in user]
    real = [named[k] for k in keys] + user
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
    recorded = list(values) if values is not None else [flat_args[i] for i in tensor_pos]
    written = written_inputs(gm, placeholders[len(keys):]) if inputs_after is not None else []
    for position, (n, v) in enumerate(zip(placeholders[len(keys):], recorded)):
        if input_attrs and position in input_attrs:
            attr_keys[n.name] = input_attrs[position]
            tensors[input_attrs[position]] = v
        else:
            inputs[n.name] = f"{gname}/input/{n.name}"
            tensors[inputs[n.name]] = v
    record_constants(gm, gname, attr_keys, tensors)
    gjson = graph_to_json(gm, gname, attr_keys)
    outputs = [(oname, value) for oname, value in zip(eager_names, eager_leaves) if isinstance(value, torch.Tensor)]
    for position, ph in written:
        key = attr_keys.get(ph.name) or inputs[ph.name]
        outputs.append((f"mutated/{key}", inputs_after[position].detach().to("cpu", copy=True)))
    out_keys, out_names = [], []
    for k, (oname, value) in enumerate(outputs):
        out_keys.append(f"{gname}/output/{k}")
        out_names.append(oname)
        tensors[out_keys[-1]] = value
    entry = _graph_entry(gname, inputs, out_keys, out_names)
    if fixed:
        entry["note"] = ("values the code read out of tensors while tracing (a branch on data, .item()) are constants "
                         "of this graph, as the recorded call took them")
    return gjson, entry, tensors


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
    # The tensor inputs as the call left them (live: each lowering copies only those its graph
    # writes, its new value); every lowering traces copies or fakes, never these.
    after = [x for x in inputs if isinstance(x, torch.Tensor)]

    def aot():  # tensor subclasses (DTensor) desugared: the graph takes and returns their inner (local) tensors
        aten, inner, outs = without_opaque_inputs(aot_inference_graph(gm, copies()), desugared(values), desugared(outputs))
        # A subclass input's writes are its inner tensors'.
        return capture_symbolic_graph(aten, None, name, inner, outs, input_attrs,
                                      inputs_after=None if _has_subclasses(values) else after)

    def export():
        ep = torch.export.export(gm, tuple(inputs), strict=False).run_decompositions({})
        return lower_exported(ep, name, leaves, names, tensor_values, input_attrs, after,
                              lambda target: gm.get_parameter(target).detach().to("cpu", copy=True)
                              if target in dict(gm.named_parameters()) else gm.get_buffer(target).detach().to("cpu", copy=True),
                              attrs_before)

    def fx_trace():
        return lower_make_fx(gm, tuple(copies()), {}, name, leaves, names, "eval", input_attrs, tensor_values,
                             inputs_after=after)

    # A graph of torch.func transforms (vmap, grad inside the compiled code): torch.export fails
    # on it, or traces grad's result as zeros; AOTAutograd flattens it as it does for a backend.
    # A graph of tensor subclasses (DTensor: tensor parallelism) too, taken or made (DTensor.from_local
    # of a plain tensor): AOTAutograd desugars them into plain tensors and the functional
    # collectives their ops make.
    # A graph that enters autocast itself (autocast_entered) too: torch.export, tracing it again,
    # runs a checkpointed block inside it without the autocast (a Conv2d's output float32 where the
    # program's was bfloat16), and make_fx fails on the checkpoint's functionalization.
    aot_first = (_autocast_active(inputs) or autocast_entered(gm) is not None or _calls_transforms(gm)
                 or _has_subclasses(values) or _has_subclasses(leaves))
    lowerings = [aot, fx_trace] if aot_first else [export, fx_trace]
    why, failed = "", []
    # Every lowering traces as training decomposes where the program differentiates the graph
    # (judged on the live inputs: the copies they trace need no grad).
    differentiated = _differentiated(inputs)
    for k, lower in enumerate(lowerings):
        try:
            with transform_state_kept(), _as_training_traces(differentiated):
                lowered = lower()
        except Exception as e:  # the next lowering may record it (make_fx: data-dependent sizes are concrete)
            if k == len(lowerings) - 1:
                if not failed:
                    raise
                # Each lowering's own reason: the first is often the one that says what the graph
                # holds (an op that writes inside a checkpointed block), the last only how make_fx failed.
                said = "; ".join(f"{n}: {type(x).__name__}: {x}" for n, x in failed + [(lower.__name__, e)])
                raise CaptureError(f"no lowering recorded the graph ({said})") from e
            failed.append((lower.__name__, e))
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


def _functorch_calls(gm: fx.GraphModule) -> List[str]:
    """The names of the torch.func level-bookkeeping functions dynamo's graph calls."""
    return [getattr(n.target, "__name__", "") for n in gm.graph.nodes if n.op == "call_function"
            and (getattr(n.target, "__module__", None) or "").startswith(("torch._functorch", "torch._C._functorch"))]


def _calls_transforms(gm: fx.GraphModule) -> bool:
    """Whether dynamo's graph runs torch.func transforms itself (their level bookkeeping calls)."""
    return bool(_functorch_calls(gm))


def _differentiates_inside(gm: fx.GraphModule) -> bool:
    """Whether dynamo's graph runs a torch.func transform that differentiates (grad, vjp, jacrev,
    jvp, jacfwd: their grad or dual-level bookkeeping calls); vmap alone does not."""
    return any(k in name for name in _functorch_calls(gm) for k in ("grad", "jvp", "dual"))


def _without_grad_mode_switches(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of `gm` (its graph copied, its modules shared) without the `torch._C._set_grad_enabled`
    calls dynamo records for the program's no_grad / enable_grad regions; `gm` itself, which the
    program runs, is left as it is."""
    switches = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch._C._set_grad_enabled and not n.users]
    if not switches:
        return gm
    graph = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {}
    for n in gm.graph.nodes:
        if n in switches:
            continue
        env[n] = graph.node_copy(n, lambda a: env[a])
    return fx.GraphModule(gm, graph)


def _no_backward(gm: fx.GraphModule, _inputs: Any):
    """The backward compiler of aot_inference_graph: an inference trace has none. Were a joint graph
    traced, its backward must not take the forward's place: it is refused by name."""
    raise CaptureError("AOTAutograd traced a joint graph where an inference graph was asked")


def _is_subclass(x: Any) -> bool:
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    return isinstance(x, torch.Tensor) and is_traceable_wrapper_subclass(x)


def _has_subclasses(values: Sequence[Any]) -> bool:
    return any(_is_subclass(v) for v in values)


def desugared(values: Any) -> Any:
    """`values` with each traceable tensor subclass (DTensor) replaced by its inner tensors, in
    the order AOTAutograd's graph takes and returns them (__tensor_flatten__'s, depth first)."""
    if isinstance(values, (list, tuple)):
        out: List[Any] = []
        for v in values:
            if _is_subclass(v):
                attrs, _ = v.__tensor_flatten__()
                out.extend(desugared([getattr(v, a) for a in attrs]))
            else:
                out.append(desugared(v) if isinstance(v, (list, tuple)) else v)
        return type(values)(out) if isinstance(values, tuple) else out
    return desugared([values])[0] if _is_subclass(values) else values


def symbolic_dims(values: Sequence[Any]) -> List[Optional[Tuple[List[int], List[int]]]]:
    """Per value of a symbolic graph's call (dynamo's fake examples, its inputs or its outputs):
    for a tensor subclass (a DTensor of a dynamic shape), the positions of its symbolic sizes and
    of its symbolic strides, which AOTAutograd takes and returns after the subclass's inner tensors
    (subclass_utils' append_symints); else None."""
    def symbolic(xs) -> List[int]:
        return [i for i, x in enumerate(xs) if isinstance(x, torch.SymInt)]
    return [(symbolic(v.size()), symbolic(v.stride())) if _is_subclass(v) else None for v in values]


def desugared_symbolic(values: Sequence[Any], dims: Sequence[Optional[Tuple[List[int], List[int]]]]) -> List[Any]:
    """`values` desugared as a symbolic AOTAutograd graph takes or returns them: each subclass's
    inner tensors, then its sizes and strides at `dims` (symbolic_dims of the compile's fake
    values) as this call's numbers. Nested subclasses' own sizes are not appended (DTensor holds a
    plain tensor)."""
    out: List[Any] = []
    for k, v in enumerate(values):
        out.extend(desugared([v]))
        d = dims[k] if k < len(dims) else None
        if d is not None and _is_subclass(v):
            out.extend(int(v.size(i)) for i in d[0])
            out.extend(int(v.stride(i)) for i in d[1])
    return out


def without_opaque_inputs(aten: fx.GraphModule, values: List[Any], outputs: Any = None) -> Tuple[fx.GraphModule, List[Any], Any]:
    """The graph without its placeholders whose values are objects the format has no type for (a
    DeviceMesh, a process group: what dynamo passes along with a DTensor) and that no op reads.
    One the graph only returns (dynamo hands a DeviceMesh on across a graph break, as a graph
    output) is returned as None instead, and `outputs` (the program's, flattened alike) has None
    there too. One an op reads cannot be recorded: CaptureError naming it, never a dir whose loader
    would find an input with no value. Returns the graph, the values kept, and `outputs`."""
    placeholders = [n for n in aten.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(values):
        return aten, values, outputs  # capture_symbolic_graph says what is wrong
    kept, returned = [], []
    for n, v in zip(placeholders, values):
        if v is None or isinstance(v, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            kept.append(v)
            continue
        if any(u.op != "output" for u in n.users):
            raise CaptureError(f"graph input {n.name} is a {type(v).__name__}, which the graph reads and a repro dir cannot hold")
        for out in list(n.users):
            out.args = fx.node.map_arg(out.args, lambda a, n=n: None if a is n else a)
            returned.append(v)
        aten.graph.erase_node(n)
    aten.recompile()
    if returned and outputs is not None:
        outputs = torch.utils._pytree.tree_map(lambda x: None if any(x is r for r in returned) else x, outputs)
    return aten, kept, outputs


def _autocast_active(inputs: Sequence[Any]) -> bool:
    devices = {x.device.type for x in inputs if isinstance(x, torch.Tensor)} | {"cpu"}
    return any(torch.is_autocast_enabled(d) for d in devices if d in ("cpu", "cuda", "xpu", "mps", "hpu"))


def autocast_entered(gm: fx.GraphModule, device: Optional[str] = None) -> Optional[torch.dtype]:
    """The autocast dtype dynamo's graph enters itself (a `with torch.autocast(...)` inside the
    compiled code: its _enter_autocast(device_type, dtype, enabled, cache_enabled) call), on
    `device` or any; None where it enters none (or only disabled ones)."""
    enter = getattr(torch.amp.autocast_mode, "_enter_autocast", None)
    if enter is None:
        return None
    for m in gm.modules():
        if not isinstance(m, fx.GraphModule):
            continue
        for n in m.graph.nodes:
            if n.op != "call_function" or n.target is not enter or not n.args:
                continue
            kind = n.args[0] if isinstance(n.args[0], str) else None
            dtype = n.args[1] if len(n.args) > 1 and isinstance(n.args[1], torch.dtype) else None
            enabled = n.args[2] if len(n.args) > 2 else True
            if kind is None or enabled is False or (device is not None and kind != device):
                continue
            return dtype or torch.get_autocast_dtype(kind)
    return None


def _differentiated(inputs: Sequence[Any]) -> bool:
    """Whether a call on `inputs` is one autograd records (grad on, a tensor input that needs it)."""
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs)


def _as_training_traces(differentiated: bool):
    """Where the program differentiates the graph, the inference trace decomposes its ops as a
    training trace does. One decomposition of ATen chooses by grad: the CPU LSTM's
    (select_one_layer_lstm_function) takes oneDNN's RNN layer only where its input needs no grad,
    with `train=False`, a call whose backward needs the workspace only a training call makes;
    traced so, the recorded train step failed on every backend (aot_eager, Inductor). With
    oneDNN off for the trace, the LSTM is the unrolled cell a training trace records. (Of torch's
    Python decompositions only the LSTM's reads the flag; an op recorded whole keeps its kernel's
    choice to the replay, where the flag is as the replay's process has it.)"""
    return _onednn_off() if differentiated else contextlib.nullcontext()


@contextlib.contextmanager
def _onednn_off():
    """oneDNN's enabled flag off, and only it (torch.backends.mkldnn.flags sets its TF32 and
    fp32-precision settings too, whose legacy and new APIs then clash: torch.export failed after it
    in the same process)."""
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(was)


def aot_inference_graph(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> fx.GraphModule:
    """The ATen graph AOTAutograd hands a backend for `gm` (dynamo's graph, traced with its fake,
    possibly symbolic, example inputs): functionalized, SymInt inputs and size arithmetic kept.
    Traced without grad: the forward as inference (a train run differentiates it itself), its
    ops decomposed as a training trace decomposes them where `example_inputs` are a call autograd
    records (dynamo's fakes of a train call; capture_graph_module, which passes copies, says so
    around it)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    captured: Dict[str, fx.GraphModule] = {}

    def fw_compiler(g, _inputs):
        captured["gm"] = g
        return g

    # Without grad, unless the graph differentiates inside itself (torch.func's grad, jacrev, jvp
    # trace only with it; the graph is still an inference graph where its inputs need no grad).
    # vmap alone is traced without. Without grad, the graph's own grad-mode switches go too: a
    # `torch.no_grad()` region inside a train graph (HF's rotary embeddings) ends by turning grad
    # back on, and the outputs after it, computed from parameters that require grad, made
    # AOTAutograd trace the joint graph, whose forward returns the saved activations (a symbolic
    # HF train step was refused so). Grad mode changes no forward value.
    differentiates = _differentiates_inside(gm)
    traced = checkpointed.as_marked_calls(gm)
    with torch.enable_grad() if differentiates else torch.no_grad(), _as_training_traces(_differentiated(example_inputs)):
        aot_module_simplified(traced if differentiates else _without_grad_mode_switches(traced), list(example_inputs),
                              fw_compiler=fw_compiler, bw_compiler=_no_backward, keep_inference_input_mutations=True)
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
