"""What the dump backend (dynamo_backend.py) records: each graph lowered with its real inputs,
outputs and (in training) the gradients its backward got, the facts the manifest states per
graph (dtypes, autocast, device, grad), the graphs it could not record and why, and the repro
dir rewritten after every change."""
from __future__ import annotations

import contextlib
import io
import logging
import re
import threading
import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import backward_graph, checkpointed
from .errors import CaptureError
from .lowered import PRODUCER, flatten_outputs
from .lowering import (aot_inference_graph, autocast_entered, capture_graph_module, desugared, desugared_symbolic, symbolic_dims,
                       transform_state_kept, without_opaque_inputs)
from .replay_check import replay_mismatch
from .symbolic_lowering import capture_symbolic_graph, unbacked_values
from .loops import record_iterations
from . import distributed
from .host_ops import describe_graphs
from .serialize import write_repro_dir


class ParityCaptureWarning(UserWarning):
    """A graph the dump backend could not record (it ran eagerly)."""


# Lower precision first: the dtype whose tolerance applies when a graph holds several.
_PRECISION = {"float16": 0, "bfloat16": 0, "float8_e4m3fn": -1, "float8_e5m2": -1, "float32": 1, "float64": 2}


def least_precise(dtypes) -> Optional[str]:
    return min(sorted(dtypes), key=lambda d: _PRECISION.get(d, 1)) if dtypes else None


def _dtype_name(t: torch.dtype) -> str:
    return str(t).removeprefix("torch.")


def _source_name(node: torch.fx.Node) -> str:
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", "") if source is not None else ""
    return name() if callable(name) else (name or "")


def attr_key(node: torch.fx.Node, qualified: bool = False) -> Optional[str]:
    """`param/<fqn>` or `buffer/<fqn>` when the placeholder is a module's parameter or buffer
    that dynamo lifted to an input (its source is `L['self']._modules['fc']._parameters['w']`).
    `qualified`: the fqn starts with the module's own name where it is not `self` (a compiled
    function's global or local `m1`: `G['m1']._parameters['weight']` is `m1.weight`)."""
    source = _source_name(node)
    if not re.search(r"_(parameters|buffers)\['[^']*'\]$", source):
        return None  # not a parameter or buffer itself (an attribute of one: `....grad`, a gradient)
    parts = re.findall(r"_(modules|parameters|buffers)\['([^']*)'\]", source)
    kind = parts[-1][0]
    root = re.match(r"[GL]\['([^']*)'\]", source) if qualified else None
    fqn = ".".join(([root.group(1)] if root and root.group(1) != "self" else []) + [p for _, p in parts])
    return f"{'param' if kind == 'parameters' else 'buffer'}/{fqn}"


_AS_EVAL = "ran with grad; its backward has not run (yet): recorded as eval"


def _add_note(entry: Dict[str, Any], note: str) -> None:
    """Notes of a manifest entry: one string, its notes joined by '; '."""
    entry["note"] = "; ".join(n for n in (entry.get("note"), note) if n)


def _drop_note(entry: Dict[str, Any], note: str) -> None:
    kept = "; ".join(p.strip("; ") for p in entry.get("note", "").split(note) if p.strip("; "))
    if kept:
        entry["note"] = kept
    else:
        entry.pop("note", None)


class _CompileFacts:
    """What only the compile-time graph says (dynamo drops the placeholders' sources and fake
    values once the backend returns): parameter/buffer keys per input, symbolic shapes."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: List[Any]):
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.placeholders = [n.name for n in placeholders]
        self.attr_keys = [attr_key(n) for n in placeholders]
        # Two modules' parameters of one name in one graph (a step function's globals m1, m2):
        # those keys named with their module's root.
        named = [attr_key(n, qualified=True) for n in placeholders]
        repeated = {k for k in self.attr_keys if k is not None and self.attr_keys.count(k) > 1}
        self.attr_keys = [q if k in repeated else k for k, q in zip(self.attr_keys, named)]
        self.attr_keys = [f"{k}#{i}" if k is not None and self.attr_keys.count(k) > 1 else k for i, k in enumerate(self.attr_keys)]
        self.unrecordable: Optional[str] = None  # why the graph cannot be recorded, found at compile time
        # A symbolic graph: its ATen form, traced now with dynamo's symbolic example inputs (at
        # the first call only the real values are left), and the ShapeEnv of its symbols.
        self.aten: Optional[torch.fx.GraphModule] = None
        self.shape_env = None
        # Of a symbolic graph's tensor subclass inputs and outputs, the symbolic sizes and strides
        # its ATen form takes and returns after their inner tensors (lowering.symbolic_dims).
        self.input_dims: List[Any] = []
        self.output_dims: List[Any] = []
        try:
            if symbolic_reason(gm):
                from torch._guards import detect_fake_mode
                with _quiet():
                    self.aten = aot_inference_graph(gm, example_inputs)
                self.shape_env = detect_fake_mode(example_inputs).shape_env
                out = next(n for n in gm.graph.nodes if n.op == "output")
                returned = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
                # (dynamo's placeholders: the example inputs it hands a backend hold a subclass's
                # outer sizes as numbers where its graph has them symbolic)
                self.input_dims = symbolic_dims([n.meta.get("example_value") for n in placeholders])
                self.output_dims = symbolic_dims([r.meta.get("example_value") if isinstance(r, torch.fx.Node) else r
                                                  for r in returned])
        except Exception as e:  # the program goes on; the first call says why nothing was recorded
            from torch._dynamo.exc import RestartAnalysis
            if isinstance(e, RestartAnalysis):
                raise  # dynamo's own protocol (a float input to specialize): it compiles again, as for Inductor
            self.unrecordable = f"a symbolic graph AOTAutograd could not trace ({_reason(e)})"


def specialize_scalar_inputs(gm: torch.fx.GraphModule, values: List[Any]) -> torch.fx.GraphModule:
    """A copy of gm where `.item()` of a 0-dim tensor input is the number it held in this call.
    Dynamo passes a module's Python floats (LayerNorm's eps, Dropout's p) as 0-dim tensors when
    it does not specialize floats (dynamic=True) and reads them back with .item(), which a trace
    with real values cannot follow; in the recorded call they are these constants. The program's
    own gm is not touched."""
    import copy
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    items = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "item" and n.args
             and getattr(n.args[0], "op", None) == "placeholder"]
    if not items:
        return gm
    graph = copy.deepcopy(gm.graph)
    by_name = {n.name: n for n in graph.nodes}
    for item in items:
        k = placeholders.index(item.args[0])
        v = values[k] if k < len(values) else None
        if not isinstance(v, torch.Tensor) or v.dim() != 0:
            continue
        node = by_name[item.name]
        for user in list(node.users):
            user.replace_input_with(node, v.item())
        graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph)


def symbolic_reason(gm: torch.fx.GraphModule) -> Optional[str]:
    """Why a graph is symbolic (its placeholders hold SymInts or sizes with free symbols, or a
    node makes a value from data: `.item()`, `nonzero`, with capture_scalar_outputs /
    capture_dynamic_output_shape_ops), else None. Read when dynamo hands the graph over (its
    nodes' metadata goes afterwards)."""
    from torch.fx.experimental.symbolic_shapes import free_symbols, free_unbacked_symbols
    symbols, unbacked = set(), set()
    for n in gm.graph.nodes:
        v = n.meta.get("example_value", n.meta.get("val"))
        if not isinstance(v, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool, list, tuple)):
            continue
        if n.op == "placeholder":
            symbols |= {str(s) for s in free_symbols(v)}
        else:
            unbacked |= {str(s) for s in free_unbacked_symbols(v)}
    if symbols:
        return f"symbolic shapes ({', '.join(sorted(symbols))[:80]})"
    if unbacked:
        return f"data-dependent values ({', '.join(sorted(unbacked))[:80]})"
    return None


def describe_call(args: List[Any], gm: Optional[torch.fx.GraphModule] = None) -> Dict[str, Any]:
    """What a call ran: floating dtypes, device, autocast (on at the call, or entered by the graph
    `gm` itself: a `with torch.autocast` inside the compiled code), grad."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    dtypes = sorted({_dtype_name(t.dtype) for t in tensors if t.is_floating_point()})
    devices = sorted({t.device.type for t in tensors})
    device = next((d for d in devices if d != "cpu"), "cpu")
    info: Dict[str, Any] = {"dtype": least_precise(dtypes) or "float32", "device": device}
    if len(dtypes) > 1:
        info["dtypes"] = dtypes
    if torch.is_autocast_enabled(device):
        info["amp"] = _dtype_name(torch.get_autocast_dtype(device))
    elif gm is not None and (entered := autocast_entered(gm, device)) is not None:
        info["amp"] = _dtype_name(entered)
    info["grad"] = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    return info


class _Graph:
    """One recorded graph: its JSON, its manifest entry, its tensors, and what it needs to
    become a train graph when the program's backward reaches it."""

    def __init__(self, name: str, gjson: Dict[str, Any], entry: Dict[str, Any], tensors: Dict[str, torch.Tensor]):
        self.name, self.gjson, self.entry, self.tensors = name, gjson, entry, tensors
        self.grad_outputs: List[int] = []  # positions (in expected_outputs) of outputs that require grad
        # Where its backward is recorded as a graph of its own (backward_graph.wanted): the dynamo
        # graph, copies of the call's inputs before it, each input's name in the record.
        self.joint: Optional[Tuple[torch.fx.GraphModule, List[Any], List[Optional[str]]]] = None


class _Dump:
    def __init__(self, out_dir: str, model_name: str, max_graphs: Optional[int], imports=(), suite: Optional[str] = None):
        self.out_dir = out_dir
        self.suite = suite
        self.imports = list(imports)
        self.model_name = model_name
        self.max_graphs = max_graphs
        self.compiled = 0
        self.graphs: List[_Graph] = []
        self.skipped: List[Dict[str, str]] = []
        self.tensors: Dict[str, torch.Tensor] = {}
        self.lock = threading.RLock()

    def full(self) -> bool:
        with self.lock:
            return self.max_graphs is not None and self.compiled >= self.max_graphs

    def next_name(self) -> Optional[str]:
        with self.lock:
            if self.max_graphs is not None and self.compiled >= self.max_graphs:
                return None
            self.compiled += 1
            return f"graph_{self.compiled - 1}"

    # -- recording (never raises into the program) --

    def record(self, name: str, gm: torch.fx.GraphModule, facts: "_CompileFacts", args: List[Any], snapshot: List[Any],
               outputs: Any, attrs: Optional[Dict[str, torch.Tensor]] = None) -> Optional[_Graph]:
        with self.lock:
            try:
                if facts.unrecordable:
                    raise _NotRecorded(facts.unrecordable)
                devices = _cuda_devices(args)
                # Recording draws none of the program's random numbers, and a failed trace does
                # not print torch's own tracing logs into the program's output (the warning says it).
                with torch.random.fork_rng(devices=devices), _quiet(), transform_state_kept():
                    g = self._lower(name, gm, facts, args, snapshot, outputs, attrs)
                self._keep_shared_keys_apart(g)
                self._keep(g, devices, "the program did")
                return g
            except Exception as e:  # anything: the program must go on
                self.skip(name, e)
                return None

    def _keep(self, g: _Graph, devices: List[int], computed_by: str) -> None:
        """Graph `g` checked, replayed as parity replays it against what `computed_by` computed
        (CaptureError where it differs), its while_loops' iteration counts recorded, and added to
        the dir. Its autocast casts are ops of its own, so the program's ambient autocast is off
        (left on, it cast again what the program ran in float32 inside `autocast(enabled=False)`:
        a rotary embedding's frequencies in bf16, measured 32% off at 1024 positions)."""
        on = f"cuda:{devices[0]}" if devices else "cpu"
        with torch._C._DisableAutocast():
            why = replay_mismatch(g.gjson, g.entry, {**self.tensors, **g.tensors}, on)
            if why:
                raise CaptureError(f"the recorded graph does not compute what {computed_by}: {why}")
            record_iterations(g.gjson, g.entry, {**self.tensors, **g.tensors}, on)
        self.graphs.append(g)
        self.tensors.update(g.tensors)
        self.write()

    def _lower(self, name, gm, facts, args, snapshot, outputs, attrs=None) -> _Graph:
        input_attrs: Dict[int, str] = {}
        position = 0
        wants_grad: List[Tuple[int, bool]] = []
        for k, value in enumerate(args):
            if not isinstance(value, torch.Tensor):
                continue
            key = facts.attr_keys[k] if k < len(facts.attr_keys) else None
            if key is None and isinstance(value, torch.nn.Parameter):
                key = f"param/{facts.placeholders[k]}"
            if key is not None:
                input_attrs[position] = key
            wants_grad.append((position, bool(value.requires_grad)))
            position += 1
        with torch.no_grad():
            out_copy = torch.utils._pytree.tree_map(
                lambda t: t.detach().to("cpu", copy=True) if isinstance(t, torch.Tensor) else t, outputs)
        if facts.aten is not None:
            aten, values, outs, called = facts.aten, snapshot, out_copy, args
            # The tensor inputs as the call left them: what a graph that writes them (a BatchNorm's
            # running statistics) wrote; a subclass input's writes are its inner tensors'.
            after = [a for a in args if isinstance(a, torch.Tensor)]
            if any(d is not None for d in facts.input_dims + facts.output_dims):  # tensor subclasses (DTensor)
                after = None
                flat_out = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                aten, values, outs = without_opaque_inputs(aten, desugared_symbolic(snapshot, facts.input_dims),
                                                           desugared_symbolic(flat_out, facts.output_dims))
                called = desugared_symbolic(args, facts.input_dims)
            on_devices = [s.to(a.device) if isinstance(s, torch.Tensor) else s for s, a in zip(values, called)]
            gjson, entry, tensors = capture_symbolic_graph(aten, facts.shape_env, name, values, outs, input_attrs,
                                                           unbacked_values(aten, on_devices), inputs_after=after)
        else:
            gjson, entry, tensors = capture_graph_module(specialize_scalar_inputs(gm, snapshot), list(args), name,
                                                         outputs=out_copy, input_attrs=input_attrs, values=snapshot,
                                                         attrs_before=attrs)
        info = describe_call(args, gm)
        grad = info.pop("grad")
        entry.update(info)
        entry["mode"] = "eval"
        g = _Graph(name, gjson, entry, tensors)
        if grad:
            # Which lowered inputs the program differentiated: placeholders by name, attrs by key.
            names = iter(entry["inputs"].keys())
            needs = []
            for pos, requires in wants_grad:
                label = input_attrs[pos] if pos in input_attrs else next(names)
                if requires:
                    needs.append(label)
            entry["requires_grad"] = needs
            g.grad_outputs = [k for k, v in enumerate(_recorded_outputs(g, outputs))
                              if isinstance(v, torch.Tensor) and v.requires_grad]
            _add_note(entry, _AS_EVAL)
        policies = checkpointed.selective_policies(gm)
        if policies:
            _add_note(entry, f"the selective checkpoint policies of {', '.join(policies)} are Python, not data: "
                             "those blocks are recorded as plain checkpoints (every value recomputed)")
        return g

    def _keep_shared_keys_apart(self, g: _Graph) -> None:
        """A parameter, buffer or constant several graphs read shares its key (`param/<fqn>`)
        while its value is the same. Where another graph's tensor of that key differs (an
        optimizer step between two graphs' first calls; two optimizers whose graphs name their
        parameters alike: `param/self___param_groups_0__params___0`), this graph's becomes
        `<key>@<graph>`, everywhere the graph and its entry name it."""
        renames = {}
        for key, value in g.tensors.items():
            held = self.tensors.get(key)
            if key.startswith(g.name + "/") or held is None or not isinstance(value, torch.Tensor):
                continue
            if held.shape != value.shape or held.dtype != value.dtype or not torch.equal(held, value.to(held.device)):
                renames[key] = f"{key}@{g.name}"
        if not renames:
            return
        renames.update({f"mutated/{k}": f"mutated/{v}" for k, v in renames.items()})

        def rename(x):
            if isinstance(x, str):
                return renames.get(x, x)
            if isinstance(x, list):
                return [rename(v) for v in x]
            if isinstance(x, dict):
                return {renames.get(k, k): rename(v) for k, v in x.items()}
            return x
        g.gjson, g.entry = rename(g.gjson), rename(g.entry)
        g.tensors = {renames.get(k, k): v for k, v in g.tensors.items()}

    def add_tangents(self, g: _Graph, grads: List[Optional[torch.Tensor]]) -> None:
        """The program's backward reached graph `g`: `grads` are the gradients it fed to the
        outputs that require grad (None where none flowed)."""
        with self.lock:
            try:
                tangents: List[Optional[str]] = [None] * len(g.entry["expected_outputs"])
                fed: Dict[str, torch.Tensor] = {}
                for k, grad in zip(g.grad_outputs, grads):
                    if grad is not None:
                        tangents[k] = f"{g.name}/tangent/{k}"
                        # A DTensor output's gradient is a DTensor: the graph's output is its local
                        # tensor, which the gradient's is only where their placements agree.
                        local = desugared(grad)
                        want = g.tensors.get(g.entry["expected_outputs"][k])
                        if isinstance(want, torch.Tensor) and tuple(local.shape) != tuple(want.shape):
                            raise CaptureError(f"the gradient fed to output {k} is {list(local.shape)} on this rank where the "
                                               f"output is {list(want.shape)} (a DTensor gradient of another placement)")
                        fed[tangents[k]] = local.detach().to("cpu", copy=True)
                if not fed:
                    return
                g.tensors.update(fed)
                self.tensors.update(fed)
                g.entry["mode"] = "train"
                g.entry["tangents"] = tangents
                _drop_note(g.entry, _AS_EVAL)
                self.write()
            except Exception as e:
                _warn(f"parity dump_backend: {g.name}: its backward could not be recorded ({_reason(e)}); kept as eval")
                return
            if g.joint is not None:
                self._record_backward(g, grads)

    def _record_backward(self, g: _Graph, grads: List[Optional[torch.Tensor]]) -> None:
        """Graph `g`'s backward as a graph of its own, `<g>_backward` (backward_graph.py): its
        outputs are the gradients of g's inputs, judged where a replay runs g forward only."""
        name = f"{g.name}_backward"
        gm, args, labels = g.joint
        g.joint = None
        try:
            devices = _cuda_devices(args)
            with torch.random.fork_rng(devices=devices), _quiet(), transform_state_kept():
                gjson, entry, tensors = backward_graph.record(name, gm, args, labels, grads)
            for k in ("dtype", "dtypes", "device", "amp"):
                if k in g.entry:
                    entry[k] = g.entry[k]
            entry["mode"] = "eval"
            entry["backward_of"] = g.name
            _add_note(entry, f"the backward of {g.name} (AOTAutograd's partition): the values it saves and the gradients "
                             f"the program fed to {g.name}'s outputs in, the gradients of its inputs out")
            bwd = _Graph(name, gjson, entry, tensors)
            self._keep_shared_keys_apart(bwd)
            self._keep(bwd, devices, "AOTAutograd's backward did")
        except Exception as e:  # the forward stays recorded, judged by its outputs
            _warn(f"parity dump_backend: {g.name}: its backward graph could not be recorded ({_reason(e)})")

    def skip(self, name: str, e: Exception) -> None:
        reason = _reason(e)
        self.skipped.append({"graph": name, "reason": reason})
        _warn(f"parity dump_backend: {name} not recorded ({reason}); it runs eagerly")
        try:
            self.write()
        except Exception as e2:  # the dir cannot be written at all: say so once more, go on
            _warn(f"parity dump_backend: cannot write {self.out_dir} ({_reason(e2)})")

    # -- the dir --

    def manifest(self) -> Dict[str, Any]:
        entries = [g.entry for g in self.graphs]
        m: Dict[str, Any] = {"torch_version": torch.__version__, "producer": PRODUCER + " (dynamo)",
                             "model": self.model_name}
        if self.suite:
            m["suite"] = self.suite
        # Top level: what every graph agrees on; else the train mode if any graph trains, the
        # least precise dtype, the accelerator (graphs keep their own).
        modes = {e["mode"] for e in entries}
        m["mode"] = "train" if "train" in modes else "eval"
        dtypes = {d for e in entries for d in e.get("dtypes", [e["dtype"]])}
        m["dtype"] = least_precise(dtypes) or "float32"
        if len(dtypes) > 1:
            m["dtypes"] = sorted(dtypes)
        devices = {e["device"] for e in entries}
        m["device"] = next((d for d in sorted(devices) if d != "cpu"), "cpu")
        amps = {e.get("amp") for e in entries}
        if len(amps) == 1 and None not in amps:  # a graph without "amp" takes the top level's
            m["amp"] = amps.pop()
        host = describe_graphs([g.gjson for g in self.graphs], self.imports)
        if host:
            m["host_ops"] = host
        if self.skipped:
            m["skipped_graphs"] = list(self.skipped)
        return m

    def write(self) -> None:
        # Rewritten after every change: a program that crashes later still leaves a valid dir. A
        # rank of a distributed program writes OUT/rank<r> (rank 0 the index too: distributed.py).
        manifest, out = self.manifest(), self.out_dir
        info = distributed.rank_info()
        if info is not None:
            manifest["distributed"] = distributed.rank_manifest_field(info, [g.gjson for g in self.graphs])
            if info["rank"] == 0:
                distributed.write_world_manifest(self.out_dir, info)
            out = distributed.rank_dir(self.out_dir, info)
        write_repro_dir(out, manifest, [(g.gjson, g.entry) for g in self.graphs], self.tensors)


@contextlib.contextmanager
def _quiet():
    """torch's tracers log and print the whole graph when a trace fails: none of that reaches
    the program's output (the one-line warning says what happened)."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


class _NotRecorded(Exception):
    pass


def _reason(e: Exception) -> str:
    """One line: the exception's first sentence (tracing errors run on for pages)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if len(text) > 120 and ". " in text[:200]:
        text = text[: text.index(". ", 0, 200) + 1]
    text = text[:400]
    return text if isinstance(e, _NotRecorded) else f"{type(e).__name__}: {text}"


def _warn(message: str) -> None:
    warnings.warn(message, ParityCaptureWarning, stacklevel=3)


def _cuda_devices(args: List[Any]) -> List[int]:
    """The CUDA devices the tensors of `args` are on (whose random state recording keeps)."""
    return sorted({a.device.index or 0 for a in args if isinstance(a, torch.Tensor) and a.is_cuda})


def _recorded_outputs(g: _Graph, outputs: Any) -> List[Any]:
    """The program's values of g's recorded outputs, in their order (by their names: a constant
    the graph returns is not recorded; a written input, `mutated/...`, is None here)."""
    names, leaves = flatten_outputs(outputs)
    by_name = dict(zip(names, leaves))
    return [by_name.get(n) for n in g.entry["output_names"]]
