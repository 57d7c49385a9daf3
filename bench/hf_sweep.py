"""Architectures beyond bench/hf_flow.py's, each as a tiny config trained one step under amp bf16
and captured with parity's dump_backend: the check that a capture records what real programs run
(the rotary embeddings of Llama-like models were refused on CUDA until the replay check stopped
running under the program's autocast). One process per model; a line of JSON per model: the graphs
recorded and the reasons of any refused.

    python bench/hf_sweep.py OUT [--device cuda] [--models phi gemma ...]
    parity verify OUT/* --backend inductor [--device cuda]

Not a timed benchmark: docs/gpu.md and docs/benchmarks.md quote its verdicts."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# name: (config class, model class, config fields beyond the common tiny ones)
LM = {
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {}),
    "falcon": ("FalconConfig", "FalconForCausalLM", {"new_decoder_architecture": True, "num_kv_heads": 2}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", {"n_embd": 64, "n_layer": 2, "n_head": 4, "rotary_dim": 8, "n_positions": 128}),
    "mpt": ("MptConfig", "MptForCausalLM", {"d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 128}),
    "deberta_v2": ("DebertaV2Config", "DebertaV2ForMaskedLM", {}),
    "mamba": ("MambaConfig", "MambaForCausalLM", {"state_size": 8}),
}
VISION = {
    "vit": ("ViTConfig", "ViTForImageClassification", {"image_size": 32, "patch_size": 8}),
    "swin": ("SwinConfig", "SwinForImageClassification", {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
                                                           "num_heads": [2, 2], "window_size": 2}),
    "convnext": ("ConvNextConfig", "ConvNextForImageClassification", {"num_stages": 2, "hidden_sizes": [16, 32], "depths": [1, 1]}),
}
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=256,
            num_key_value_heads=2, max_position_embeddings=128)


def build(name: str):
    import torch
    import transformers
    if name in LM:
        config, model, extra = LM[name]
        cfg = getattr(transformers, config)(**{**TINY, **extra})
        ids = torch.randint(0, 256, (2, 32))
        return getattr(transformers, model)(cfg), {"input_ids": ids, "labels": ids}
    config, model, extra = VISION[name]
    common = {} if name in ("swin", "convnext") else {k: TINY[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                                           "intermediate_size")}
    cfg = getattr(transformers, config)(**{**common, "num_channels": 3, "num_labels": 10, **extra})
    return getattr(transformers, model)(cfg), {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.randint(0, 10, (2,))}


def capture_one(name: str, out: str, device: str) -> dict:
    import warnings

    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
    from parity_capture import dump_backend
    torch.manual_seed(0)
    model, kwargs = build(name)
    model = model.to(device).train()
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    backend = dump_backend(out, model_name=name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast(device.split(":")[0], torch.bfloat16):
            loss = torch.compile(model, backend=backend)(**kwargs).loss
        loss.backward()
    return {"model": name, "graphs": backend.dump.compiled, "refused": [s["reason"][:300] for s in backend.dump.skipped]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", nargs="*", default=list(LM) + list(VISION))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child's model
    a = ap.parse_args()
    if a.one:
        print(json.dumps(capture_one(a.one, os.path.join(a.out, a.one), a.device)), flush=True)
        return 0
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for name in a.models:
        p = subprocess.run([sys.executable, __file__, a.out, "--device", a.device, "--one", name], capture_output=True, text=True)
        last = (p.stdout.strip().splitlines() or [""])[-1]
        if p.returncode != 0 or not last.startswith("{"):
            failed += 1
            tail = (p.stderr.strip().splitlines() or ["?"])[-1]
            print(json.dumps({"model": name, "error": tail[:300]}), flush=True)
        else:
            print(last, flush=True)
            failed += bool(json.loads(last)["refused"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
