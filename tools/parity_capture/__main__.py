"""python -m parity_capture {list, capture} — capture suite models into repro dirs."""
from __future__ import annotations

import argparse
import json
import sys

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m parity_capture")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the model suite as JSON lines")
    c = sub.add_parser("capture", help="capture a suite model into a repro dir")
    c.add_argument("--model", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--mode", default="eval", choices=["eval", "train"])
    c.add_argument("--batch-size", type=int, default=None)
    c.add_argument("--method", default="export", choices=["export", "make_fx"])
    c.add_argument("--device", default="cpu", help="capture on this device (cpu, cuda)")
    c.add_argument("--dtype", default=None, help="cast the model and floating inputs (e.g. bfloat16)")
    a = p.parse_args(argv)
    from . import models
    if a.cmd == "list":
        for name, s in models.MODELS.items():
            print(json.dumps({"name": name, "suite": s.suite, "batch_size": s.batch_size, "description": s.description}))
        return 0
    from .capture import capture
    try:
        spec, model, args, kwargs = models.build(a.model, a.batch_size)
    except KeyError as e:
        print(f"parity_capture: error: {e.args[0]}", file=sys.stderr)
        return 2
    dtype = getattr(torch, a.dtype) if a.dtype else None
    model = model.to(device=a.device, dtype=dtype) if dtype else model.to(a.device)
    move = lambda x: (x.to(a.device, dtype) if dtype and x.is_floating_point() else x.to(a.device)) \
        if isinstance(x, torch.Tensor) else x
    args = tuple(torch.utils._pytree.tree_map(move, list(args)))
    kwargs = torch.utils._pytree.tree_map(move, kwargs)
    capture(model, args, a.out, mode=a.mode, name=spec.name, example_kwargs=kwargs, method=a.method,
            extra_manifest={"suite": spec.suite, "batch_size": a.batch_size or spec.batch_size})
    print(a.out)
    return 0


if __name__ == "__main__":
    from .ending import end
    end(main())
