"""The seed's workload, a HuggingFace model trained one step under amp (or run in eval), and the
accuracy check PyTorch's dynamo runner does on it, written as `benchmarks/dynamo/common.py`'s
`check_accuracy` writes it:

    python bench/hf_flow.py python --model bert --test train     # the runner's flow, one process
    python bench/hf_flow.py capture OUT --model bert --test train  # the same program, captured
                                                                   #   with parity's dump_backend

The runner's flow (training): each run deep-copies the model, clones the inputs, resets the seed
and does forward under autocast, the loss, backward and an SGD step; the eager run twice (a
difference is eager_two_runs_differ), the fp64 run (a deepcopy cast to float64), the compiled run
(the model compiled, as the captured program compiled it), then same() over the predictions, the loss, every
parameter's gradient and every parameter after the step. Eval: forward only, under no_grad.
Prints one JSON line: the verdict, each phase's seconds and the peak device memory.

Sizes: `--size small` (the CPU's: hidden 256, 4 layers, seq 128, batch 4) or `--size gpu`
(hidden 768, 12 layers, seq 256, batch 8)."""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402

SIZES = {
    "small": dict(hidden=256, layers=4, heads=4, seq=128, batch=4, vocab=1024),
    "gpu": dict(hidden=768, layers=12, heads=12, seq=256, batch=8, vocab=8192),
}


def build(model: str, size: str, device: str):
    """The model and its inputs (labels included: the loss is computed inside the model, as HF
    training runs)."""
    import transformers as tf
    s = SIZES[size]
    h, n, a, seq, b, v = s["hidden"], s["layers"], s["heads"], s["seq"], s["batch"], s["vocab"]
    common = dict(vocab_size=v)
    if model == "bert":
        cfg = tf.BertConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=a, intermediate_size=4 * h,
                            max_position_embeddings=max(512, seq), **common)
        m = tf.BertForMaskedLM(cfg)
    elif model == "gpt2":
        cfg = tf.GPT2Config(n_embd=h, n_layer=n, n_head=a, n_positions=max(512, seq), **common)
        m = tf.GPT2LMHeadModel(cfg)
    elif model == "t5":
        cfg = tf.T5Config(d_model=h, d_kv=h // a, d_ff=4 * h, num_layers=n // 2 or 1, num_decoder_layers=n // 2 or 1,
                          num_heads=a, **common)
        m = tf.T5ForConditionalGeneration(cfg)
    else:
        raise SystemExit(f"unknown model {model}")
    # Dropout off as the runner's accuracy mode leaves it on but seeds it; keep it on: it is a
    # random op both sides must draw the same.
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, v, (b, seq), generator=g)
    labels = torch.randint(0, v, (b, seq), generator=g)
    kwargs = {"input_ids": ids.to(device), "labels": labels.to(device)}
    if model == "t5":
        kwargs["decoder_input_ids"] = torch.randint(0, v, (b, seq // 2), generator=g).to(device)
        kwargs["labels"] = torch.randint(0, v, (b, seq // 2), generator=g).to(device)
    return m.to(device), kwargs


def amp_ctx(device: str, amp: bool):
    import contextlib
    if not amp:
        return contextlib.nullcontext()
    return torch.autocast(device.split(":")[0], torch.bfloat16)


def step(model, kwargs, train: bool, amp: bool, device: str):
    """One iteration as the runner's forward_and_backward_pass (train) or forward_pass (eval)."""
    if not train:
        with torch.no_grad(), amp_ctx(device, amp):
            out = model(**kwargs)
        return [out.logits]
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.zero_grad(True)
    with amp_ctx(device, amp):
        out = model(**kwargs)
    loss = out.loss
    loss.backward()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    opt.step()
    return [out.logits, loss] + grads + [p.detach() for p in model.parameters()]


def python_flow(a) -> dict:
    from torch._dynamo.utils import same
    import torch._inductor.config as icfg
    icfg.fallback_random = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device, train = a.device, a.test == "train"
    phases = {}
    t = time.perf_counter()
    torch.manual_seed(0)
    model, kwargs = build(a.model, a.size, device)
    model.train(train)
    phases["build"] = time.perf_counter() - t
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()

    def run(m, kw, fn=step):
        torch.manual_seed(1337)
        r = fn(m, kw, train, a.amp, device)
        sync()
        return r

    t = time.perf_counter()
    ref = run(copy.deepcopy(model), kwargs)
    ref2 = run(copy.deepcopy(model), kwargs)
    phases["eager_twice"] = time.perf_counter() - t
    verdict = None
    if not same(ref, ref2, tol=0 if device.startswith("cuda") else 1e-4, equal_nan=True):
        verdict = "eager_two_runs_differ"
    t = time.perf_counter()
    try:
        m64 = copy.deepcopy(model).double()
        kw64 = {k: v.double() if v.is_floating_point() else v for k, v in kwargs.items()}
        fp64 = run(m64, kw64)
        del m64
    except Exception:
        fp64 = None
    phases["fp64"] = time.perf_counter() - t
    t = time.perf_counter()
    # The model compiled, the step around it eager: what the captured program compiled (its
    # forward and the backward AOTAutograd makes of it), so both sides compile the same graphs.
    res = run(torch.compile(copy.deepcopy(model), backend=a.backend), kwargs)
    phases["compile_and_run"] = time.perf_counter() - t
    t = time.perf_counter()
    tol = 1e-2 if train else 1e-3  # the huggingface suite's tolerances
    ok = same(ref, res, fp64_ref=fp64, cos_similarity=fp64 is None, tol=tol, equal_nan=True)
    phases["compare"] = time.perf_counter() - t
    peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else 0
    return {"verdict": verdict or ("pass" if ok else "fail_accuracy"), "wall_s": time.perf_counter() - T0,
            "phases": phases, "peak_bytes": peak}


def capture(a) -> dict:
    from parity_capture import dump_backend
    device, train = a.device, a.test == "train"
    torch.manual_seed(0)
    model, kwargs = build(a.model, a.size, device)
    model.train(train)
    name = f"{a.model}-{a.test}"
    stepped = torch.compile(model, backend=dump_backend(a.out, model_name=name))
    if train:
        with amp_ctx(device, a.amp):
            out = stepped(**kwargs)
        out.loss.backward()
    else:
        with torch.no_grad(), amp_ctx(device, a.amp):
            stepped(**kwargs)
    return {"out": a.out}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["python", "capture"])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--model", default="bert")
    ap.add_argument("--test", default="train", choices=["train", "eval"])
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--no-amp", dest="amp", action="store_false")
    a = ap.parse_args()
    print(json.dumps(python_flow(a) if a.what == "python" else capture(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
