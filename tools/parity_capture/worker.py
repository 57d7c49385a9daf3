"""The persistent Python worker parity drives: torch is imported once; requests arrive as JSON
lines over a Unix socket, one connection at a time, each answered by one JSON line.

    python -m parity_capture.worker --socket PATH

Protocol (docs/worker.md). Every request has "cmd" and an "id" echoed back; every answer has
"ok". Failures answer {"ok": false, "error_type": ..., "error": ..., "traceback": ...} and the
worker goes on. Tensors travel as safetensors files named in the request ("out").
  ping                 -> torch_version, cuda
  list_models          -> models: [{name, suite, batch_size, description}]
  list_backends        -> backends: dynamo backends registered in this torch
  capture              model, out, mode, batch_size, device, dtype -> out
  run                  repro, graph, backend, options, mode, device, iterations, out
                       -> names, compile_time_s, run_times_s   (backend run in this process)
  aot_graphs           repro, graph, backend (aot_eager | aot_eager_decomp_partition), out
                       -> out (a repro dir holding the AOTAutograd inference graph)
  aot_inductor         repro, graph, device, options, out -> package (.pt2), compile_time_s
  torchscript          repro, graph, device, out -> path (.pt)
  export_pt2           repro, graph, device, out -> path (.pt2)
  repro_script         repro, dynamo_backend, out -> out (the standalone repro.py of a repro dir)
  import_modules       modules -> {} (imports what registers a repro's host ops; parity approved them)
  host_call            op, args, tensors, out -> returns, kind (one host op; tensors through shared memory)
  host_backward        op, args, grads, diff, tensors, out -> returns (its vector-Jacobian product)
  shutdown
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time
import traceback
from typing import Any, Dict, List, Tuple

import torch

from .standalone import parse_option

SGD_LR = 0.01


def _inductor_config(options: Dict[str, Any]):
    import torch._inductor.config as cfg
    patch = {k: parse_option(v) for k, v in options.items()}
    patch.setdefault("fallback_random", True)
    return cfg.patch(patch)


def load_graph(req) -> Tuple[Any, Any]:
    """(repro, graph) of a request's "repro" and "graph" (default: the first graph); in train
    mode the graph's floating parameters that its program differentiated are nn.Parameters."""
    from .reader import graph_from_json, load_repro
    repro = load_repro(req["repro"])
    g = next((g for g in repro.graphs if g.name == req.get("graph")), repro.graphs[0])
    if req.get("mode") == "train":
        gjson = json.load(open(os.path.join(req["repro"], g.entry["file"])))
        g.module = graph_from_json(gjson, repro.tensors, parameters=g.differentiates)
    return repro, g


def device_inputs(g, device: str, train: bool) -> List[torch.Tensor]:
    xs = []
    for name, t in zip(g.input_names, g.inputs()):
        t = t.to(device)
        if train and t.is_floating_point() and g.differentiates(name):
            t = t.detach().clone().requires_grad_(True)
        xs.append(t)
    return xs


def _attr_keys(gm: torch.fx.GraphModule) -> Dict[str, str]:
    """Module attribute -> tensor key in the repro dir, for every get_attr."""
    return {n.target: n.meta["parity_target"] for n in gm.graph.nodes if n.op == "get_attr"}


def collect_train_results(gm: torch.fx.GraphModule, g, out, inputs: List[torch.Tensor]) -> Dict[str, torch.Tensor]:
    """loss, gradients of parameters and floating inputs (None -> zeros), parameters after one
    SGD step: the same list parity's C++ side builds (verifier/reference.cpp). A graph captured
    with the gradients its program fed to its outputs (tangents): every output, and the backward
    of those gradients instead of the loss's."""
    res: Dict[str, torch.Tensor] = {}
    if g.tangents():
        roots, grads = [], []
        for k, (o, t) in enumerate(zip(out, g.tangents())):
            res[f"output/{k}"] = o.detach()
            if t is not None and o.requires_grad:
                roots.append(o)
                grads.append(t.to(o.device, o.dtype))
        if roots:
            torch.autograd.backward(roots, grads)
    else:
        loss = out[0]
        loss.backward()
        res["loss"] = loss.detach()
    keys = _attr_keys(gm)
    params = list(gm.named_parameters())
    grad = lambda t: (t.grad if t.grad is not None else torch.zeros_like(t)).detach()
    for attr, p in params:
        res[f"grad/{keys[attr]}"] = grad(p)
    for name, x in zip(g.input_names, inputs):
        if x.requires_grad:
            res[f"grad/input/{name}"] = grad(x)
    with torch.no_grad():
        for attr, p in params:
            res[f"sgd/{keys[attr]}"] = (p - SGD_LR * grad(p)).detach()
    return res


def _write(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file
    tmp = path + ".tmp"
    save_file({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}, tmp)
    os.replace(tmp, path)


def cmd_run(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    train = req.get("mode") == "train"
    backend = req["backend"]
    options = req.get("options", {})
    gm = g.module.to(device)
    inputs = device_inputs(g, device, train)
    iters = max(1, int(req.get("iterations", 1)))
    # Inductor's settings are its config keys; any other dynamo backend gets them as kwargs.
    inductor = backend == "inductor"
    ctx = _inductor_config(options) if inductor else contextlib.nullcontext()
    kw = {} if inductor or not options else {"options": {k: parse_option(v) for k, v in options.items()}}
    torch._dynamo.reset()
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    with ctx:
        compiled = torch.compile(gm, backend=backend, fullgraph=True, **kw)
        grad_ctx = contextlib.nullcontext() if train else torch.no_grad()
        with grad_ctx:
            # The seed parity's reference runs use (verifier/reference.h): random ops (dropout)
            # draw the same numbers, which Inductor's fallback_random takes from eager's kernels.
            torch.manual_seed(1337)
            t0 = time.perf_counter()
            out = compiled(*inputs)
            sync()
            compile_time = time.perf_counter() - t0
            times = []
            for _ in range(iters - 1 if iters > 1 else 0):
                t0 = time.perf_counter()
                compiled(*inputs)
                sync()
                times.append(time.perf_counter() - t0)
        if train:
            tensors = collect_train_results(gm, g, out, inputs)
        else:
            tensors = {f"output/{k}": v for k, v in enumerate(out)}
    _write(req["out"], tensors)
    return {"names": list(tensors), "compile_time_s": compile_time, "run_times_s": times}


def cmd_aot_graphs(req) -> Dict[str, Any]:
    """The graph AOTAutograd hands its compiler (functionalized; with Inductor's decompositions
    and the min-cut partitioner for aot_eager_decomp_partition), as a repro dir."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._functorch.aot_autograd import aot_module_simplified

    from .serialize import graph_to_json, write_repro_dir

    repro, g = load_graph(req)
    captured = {}

    def fw_compiler(gm, example_inputs):
        captured["fw"] = gm
        return gm

    kwargs = {}
    if req["backend"] == "aot_eager_decomp_partition":
        from torch._inductor.decomposition import select_decomp_table
        kwargs = {"decompositions": select_decomp_table(), "partition_fn": min_cut_rematerialization_partition}
    device = req.get("device", "cpu")
    g.module = g.module.to(device)
    inputs = [x.to(device) for x in g.inputs()]
    # AOTAutograd sees parameters and buffers as inputs, as under torch.compile.
    params = [getattr(g.module, n.target) for n in g.module.graph.nodes if n.op == "get_attr"]
    flat_mod = _lift_attrs(g.module)
    args = params + list(inputs)
    with torch.no_grad():
        compiled = aot_module_simplified(flat_mod, args, fw_compiler=fw_compiler, **kwargs)
        compiled(*args) if callable(compiled) else None
    fw = prims_to_aten(captured["fw"])
    keys = [n.meta["parity_target"] for n in g.module.graph.nodes if n.op == "get_attr"]
    phs = [n for n in fw.graph.nodes if n.op == "placeholder"]
    attr_map = {p.name: k for p, k in zip(phs[: len(keys)], keys)}
    inputs_map = {p.name: g.entry["inputs"][orig] for p, orig in zip(phs[len(keys):], g.input_names)}
    gjson = graph_to_json(fw, g.name, attr_map)
    entry = dict(g.entry)
    entry["inputs"] = inputs_map
    needed = set(keys) | set(inputs_map.values()) | set(entry.get("expected_outputs", []))
    tensors = {k: repro.tensors[k] for k in needed}
    manifest = dict(repro.manifest)
    manifest.pop("graphs", None)
    manifest["producer"] = f"parity worker ({req['backend']})"
    write_repro_dir(req["out"], manifest, [(gjson, entry)], tensors)
    return {"out": req["out"]}


def prims_to_aten(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrites prims ops (registered in Python only, so not runnable from C++) into the ATen
    ops that compute the same thing. Ops without a rewrite stay, and parity reports them."""
    prims = torch.ops.prims
    aten = torch.ops.aten
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target is prims.convert_element_type.default:
            x, dtype = n.args
            n.target, n.args, n.kwargs = aten._to_copy.default, (x,), {"dtype": dtype}
        elif n.target is prims.iota.default:
            length = n.args[0]
            kw = n.kwargs
            start, step = kw.get("start", 0), kw.get("step", 1)
            n.target, n.args = aten.arange.start_step, (start, start + step * length, step)
            n.kwargs = {"dtype": kw.get("dtype"), "device": kw.get("device")}
    gm.graph.lint()
    gm.recompile()
    return gm


def _lift_attrs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of gm whose get_attr nodes are placeholders (first, in graph order)."""
    import copy
    g2 = copy.deepcopy(gm.graph)
    first = next(iter(g2.nodes))
    attrs = [n for n in g2.nodes if n.op == "get_attr"]
    with g2.inserting_before(first):
        for n in attrs:
            p = g2.placeholder("attr_" + n.target)
            p.meta.update(n.meta)
            n.replace_all_uses_with(p)
            g2.erase_node(n)
    return torch.fx.GraphModule(torch.nn.Module(), g2)


def _export(g, device: str):
    gm = g.module.to(device)
    inputs = tuple(x.to(device) for x in g.inputs())
    return torch.export.export(gm, inputs, strict=False), inputs


def cmd_aot_inductor(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    os.makedirs(os.path.dirname(req["out"]) or ".", exist_ok=True)
    t0 = time.perf_counter()
    with _inductor_config(req.get("options", {})):
        ep, _ = _export(g, device)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=req["out"])
    return {"package": path, "compile_time_s": time.perf_counter() - t0}


def cmd_torchscript(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    device = req.get("device", "cpu")
    gm = g.module.to(device)
    inputs = tuple(x.to(device) for x in g.inputs())
    with torch.no_grad():
        traced = torch.jit.trace(gm, inputs, check_trace=False)
    traced.save(req["out"])
    return {"path": req["out"]}


def cmd_export_pt2(req) -> Dict[str, Any]:
    repro, g = load_graph(req)
    ep, _ = _export(g, req.get("device", "cpu"))
    torch.export.save(ep, req["out"])
    return {"path": req["out"]}


def cmd_capture(req) -> Dict[str, Any]:
    from . import models
    from .capture import capture
    spec, model, args, kwargs = models.build(req["model"], req.get("batch_size"))
    device = req.get("device", "cpu")
    dtype = getattr(torch, req["dtype"]) if req.get("dtype") not in (None, "float32", "amp") else None
    model = model.to(device=device, dtype=dtype) if dtype else model.to(device)

    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(device, dtype) if dtype and x.is_floating_point() else x.to(device)
    args = tuple(torch.utils._pytree.tree_map(move, list(args)))
    kwargs = torch.utils._pytree.tree_map(move, kwargs)
    # AMP as PyTorch's benchmarks run it: float16 autocast on CUDA, bfloat16 on the CPU.
    amp = None
    if req.get("dtype") == "amp":
        amp = torch.float16 if str(device).startswith("cuda") else torch.bfloat16
    capture(model, args, req["out"], mode=req.get("mode", "eval"), name=spec.name, example_kwargs=kwargs,
            loss_fn=spec.loss if req.get("mode") == "train" else None, autocast=amp,
            extra_manifest={"suite": spec.suite, "batch_size": req.get("batch_size") or spec.batch_size})
    return {"out": req["out"]}


def cmd_list_models(req) -> Dict[str, Any]:
    from . import models
    return {"models": [{"name": n, "suite": s.suite, "batch_size": s.batch_size, "description": s.description,
                        "imports": list(s.imports)} for n, s in models.MODELS.items()]}


def cmd_list_backends(req) -> Dict[str, Any]:
    import torch._dynamo
    return {"backends": sorted(torch._dynamo.list_backends(exclude_tags=()))}


def cmd_import_modules(req) -> Dict[str, Any]:
    """Imports the modules that register a repro's host ops (parity approved them)."""
    from .host_ops import import_modules
    failed = import_modules(req.get("modules", []))
    if failed:
        m, err = next(iter(failed.items()))
        raise ImportError(f"cannot import {m}: {err}")
    return {}


def cmd_host_call(req) -> Dict[str, Any]:
    """One host op: arguments from JSON and a safetensors file (in shared memory), results to
    another."""
    from safetensors.torch import load_file
    from .host_ops import call
    tensors = load_file(req["tensors"]) if req.get("tensors") else {}
    with torch.no_grad():
        outs, kind = call(req["op"], req["args"], tensors)
    _write(req["out"], {f"r{k}": t for k, t in enumerate(outs)})
    return {"returns": len(outs), "kind": kind}


def cmd_host_backward(req) -> Dict[str, Any]:
    """The backward of one host op call (parity's C++ autograd asks for it)."""
    from safetensors.torch import load_file
    from .host_ops import backward
    grads = backward(req["op"], req["args"], req["grads"], req["diff"], load_file(req["tensors"]))
    _write(req["out"], {f"r{k}": t for k, t in enumerate(grads)})
    return {"returns": len(grads)}


def cmd_repro_script(req) -> Dict[str, Any]:
    from .repro_script import write_script
    return {"out": write_script(req["repro"], req.get("dynamo_backend") or None, req["out"])}


def cmd_ping(req) -> Dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {"torch_version": torch.__version__, "cuda": cuda, "pid": os.getpid(),
            "device_name": torch.cuda.get_device_name(0) if cuda else "cpu"}


COMMANDS = {"ping": cmd_ping, "list_models": cmd_list_models, "list_backends": cmd_list_backends,
            "capture": cmd_capture, "run": cmd_run, "aot_graphs": cmd_aot_graphs, "aot_inductor": cmd_aot_inductor,
            "torchscript": cmd_torchscript, "export_pt2": cmd_export_pt2, "repro_script": cmd_repro_script,
            "import_modules": cmd_import_modules, "host_call": cmd_host_call, "host_backward": cmd_host_backward}


def handle(req: Dict[str, Any]) -> Dict[str, Any]:
    cmd = req.get("cmd")
    if cmd not in COMMANDS:
        return {"ok": False, "error_type": "BadRequest", "error": f"unknown cmd {cmd!r}"}
    try:
        out = COMMANDS[cmd](req)
        out["ok"] = True
        return out
    except Exception as e:  # reported to parity, the worker lives on
        return {"ok": False, "error_type": type(e).__name__, "error": str(e).strip()[:4000],
                "traceback": traceback.format_exc()[-8000:]}


def serve(sock_path: str) -> None:
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path + ".tmp")
    srv.listen(1)
    os.replace(sock_path + ".tmp", sock_path)  # the socket appears only once it listens
    while True:
        conn, _ = srv.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                req = json.loads(line)
                if req.get("cmd") == "shutdown":
                    f.write(b'{"ok": true}\n')
                    f.flush()
                    return
                resp = handle(req)
                resp["id"] = req.get("id")
                f.write((json.dumps(resp) + "\n").encode())
                f.flush()


def deterministic_setup() -> None:
    """The accuracy-check settings parity's C++ eager reference uses too (verifier/experiment.cpp):
    both sides must compute under the same rules (TF32 left on for cuDNN would make compiled
    convolutions differ from the reference); random ops in Inductor fall back to eager's."""
    from .standalone import deterministic_setup as common
    common()
    import torch._inductor.config as cfg
    cfg.fallback_random = True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    a = ap.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore")
    deterministic_setup()
    serve(a.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
