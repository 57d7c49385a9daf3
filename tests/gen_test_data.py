"""Test fixture: captures the suite models the C++ tests run, and the same() corpus, into OUT.
Cached: a model already captured with this torch version is not captured again."""
from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

MODELS = ["mlp", "resnet", "llama", "bert"]


def main(out: str) -> None:
    from parity_capture import capture, models
    import gen_same_cases

    for name in MODELS:
        d = os.path.join(out, "models", name)
        m = os.path.join(d, "manifest.json")
        if os.path.exists(m) and json.load(open(m)).get("torch_version") == torch.__version__ \
                and "tensors_sha256" in json.load(open(m)):
            continue
        spec, model, args, kwargs = models.build(name)
        capture(model, args, d, name=name, example_kwargs=kwargs)
        print(f"captured {name} -> {d}")
    if not os.path.exists(os.path.join(out, "same_cases.json")):
        gen_same_cases.main(out)


if __name__ == "__main__":
    main(sys.argv[1])
