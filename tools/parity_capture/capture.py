"""capture(): lower a model to ATen with torch.export (make_fx as fallback) and write a repro dir
holding the graph, the real parameters, buffers and inputs, and the eager outputs."""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree

from .dynamo_backend import dump_backend
from .host_ops import describe_graphs
from .lowered import PRODUCER, flatten_outputs
from .lowering import lower_exported, lower_make_fx
from .replay_check import output_mismatch
from .loops import record_iterations
from .errors import CaptureError
from .serialize import write_repro_dir


def _export(model: torch.nn.Module, args: Tuple, kwargs: Dict[str, Any]):
    ep = torch.export.export(model, args, kwargs=kwargs, strict=False)
    return ep.run_decompositions({})


class WithLoss(torch.nn.Module):
    """model followed by its training loss: returns (loss, outputs)."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[[Any], torch.Tensor]):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        return self.loss_fn(out), out


@contextlib.contextmanager
def _checkpoints_seen():
    """Yields {"seen": bool}: whether the code run inside called torch.utils.checkpoint
    (use_reentrant=False, the variant torch.compile keeps as a checkpoint call)."""
    import torch.utils.checkpoint as ckpt
    flag = {"seen": False}
    original = getattr(ckpt, "_checkpoint_without_reentrant_generator", None)
    if original is None:  # a torch without it: nothing seen
        yield flag
        return

    def spy(*a, **k):
        flag["seen"] = True
        return original(*a, **k)
    ckpt._checkpoint_without_reentrant_generator = spy
    try:
        yield flag
    finally:
        ckpt._checkpoint_without_reentrant_generator = original


def _capture_checkpointed(model, args, kwargs, out_dir, name, extra_manifest, imports) -> Optional[str]:
    """A train step whose model checkpoints activations, recorded through torch.compile with the
    dump backend (fullgraph), where each checkpointed block stays a checkpoint call (torch.export
    traces the Python and records the blocks inlined): the forward and the loss's backward run
    once (the buffers left as one forward leaves them, as the eager call did; the gradients as
    they were). None when dynamo cannot take the step whole (the caller records it inlined)."""
    grads = {p: p.grad for p in model.parameters()}
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=dump_backend(out_dir, name, imports=imports), fullgraph=True)
        loss, _ = compiled(*args, **kwargs)
        loss.backward()
        manifest = json.load(open(os.path.join(out_dir, "manifest.json")))
        graphs = manifest.get("graphs") or []
        if len(graphs) != 1 or graphs[0].get("mode") != "train" or manifest.get("skipped_graphs"):
            return None
    except Exception as e:  # dynamo could not take it: export below
        warnings.warn(f"parity capture: the checkpointed train step could not be compiled whole ({type(e).__name__}: "
                      f"{str(e)[:200]}); its checkpointed blocks are recorded inlined")
        return None
    finally:
        torch._dynamo.reset()
        for p, g in grads.items():
            p.grad = g
    _extend_manifest(out_dir, dict(extra_manifest or {}, mode="train"))
    return out_dir


def _extend_manifest(out_dir: str, extra: Dict[str, Any]) -> None:
    if not extra:
        return
    path = os.path.join(out_dir, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    manifest.update(extra)
    with open(path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2)
    os.replace(path + ".tmp", path)


def _restore_written(inputs: Sequence[torch.Tensor], before: Sequence[torch.Tensor]) -> Optional[List[torch.Tensor]]:
    """The inputs' values after the model's call, each input whose value the call changed (a write
    in place, through a view or `.data` too) written back to its value `before`; None when the
    call changed none (nothing copied, and the lowering traces the inputs themselves)."""
    written = [not torch.equal(x, b) for x, b in zip(inputs, before)]
    if not any(written):
        return None
    after = [x.detach().clone() if w else x for x, w in zip(inputs, written)]
    with torch.no_grad():
        for x, b, w in zip(inputs, before, written):
            if w:
                x.copy_(b)
    return after


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
            dynamic_shapes: Optional[Sequence[Any]] = None, suite: Optional[str] = None) -> str:
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
    suite: the benchmark suite the model belongs to (huggingface, timm, torchbench): its
    tolerances apply and `parity ci` gates it against that suite's expected file (default "repro").
    """
    if suite is not None:
        extra_manifest = dict(extra_manifest or {}, suite=suite)
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
    # The buffers as the call found them: a forward that writes its buffers (a cache, a step
    # count, a custom op's mutates_args) leaves them changed, and the graph's inputs are what the
    # recorded call read.
    before = {k: v.detach().clone() for k, v in model.named_buffers(remove_duplicate=False)}
    flat_inputs = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    inputs_before = [x.detach().clone() for x in flat_inputs]
    with _checkpoints_seen() as checkpoints:
        eager = _run_eager(model, args, kwargs, mode)
    # A model that writes its inputs in place (an after_aot graph of an optimizer step: foreach
    # ops copied back into its arguments) leaves them changed: the written values become outputs
    # (`mutated/...`, lower_exported), and the inputs get back the values the call read, which
    # the graph records as its inputs and the caller gets back as they were.
    inputs_after = _restore_written(flat_inputs, inputs_before)
    if mode == "train" and checkpoints["seen"] and method == "export":
        with torch.no_grad():  # the buffers as the call found them, for the compiled call
            for k, v in model.named_buffers(remove_duplicate=False):
                v.copy_(before[k])
        done = _capture_checkpointed(model, args, kwargs, out_dir, name or type(model.model).__name__, extra_manifest, imports)
        if done is not None:
            return done
    eager_names, eager_leaves = flatten_outputs(eager)
    if mode == "train":  # (loss, outputs): "0" -> "loss", "1.logits" -> "logits"
        eager_names = ["loss" if n == "0" else (n[2:] if n.startswith("1.") else "output") for n in eager_names]
    gname = "graph_0"
    producer = PRODUCER
    lowered = None
    if method == "export":
        try:
            ep = _export(model, args, kwargs)
            lowered = lower_exported(ep, gname, eager_leaves, eager_names, flat_inputs, attrs_before=before,
                                     inputs_after=inputs_after)
            if output_mismatch(lowered) is not None:
                lowered = None  # export kept a composite op whole under autocast: make_fx below
            else:
                producer += " (torch.export)"
        except Exception:  # export failed, or its graph cannot be recorded (a data-dependent size): make_fx
            lowered = None
    if lowered is None:
        lowered = lower_make_fx(model, args, kwargs, gname, eager_leaves, eager_names, mode, attrs_before=before,
                                inputs_after=inputs_after)
        producer += " (make_fx)"
        why = output_mismatch(lowered)
        if why is not None:
            raise CaptureError(f"the lowered graph does not compute what the model did: {why}")
    gjson, entry, tensors = lowered
    record_iterations(gjson, entry, tensors, next((str(x.device) for x in flat_inputs if x.device.type != "cpu"), "cpu"))
    if not entry["expected_outputs"]:
        raise CaptureError("the traced graph computes none of the model's outputs (each is a constant of the trace, "
                           "as a value read out of a tensor is): nothing to replay")
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
    _extend_manifest(out_dir, extra_manifest or {})
    return out_dir
