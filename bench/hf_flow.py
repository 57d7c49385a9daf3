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

Models: MODELS (BERT, RoBERTa, ELECTRA, ALBERT, DistilBERT, GPT-2, GPT-NeoX, Llama, Mistral, Qwen2,
OPT, BLOOM, T5, BART, XLM-RoBERTa, Megatron-BERT, GPTBigCode, BioGPT). Sizes: `--size small` (the CPU's: hidden 256, 4 layers, seq 128, batch 4)
or `--size gpu` (hidden 768, 6 layers, seq 256, batch 8), or `--size large` (issue 43's GPT-2 row: hidden 1024,
12 layers, 16 heads, seq 256, batch 8, GPT-2's own vocabulary of 50257)."""
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
    "gpu": dict(hidden=768, layers=6, heads=12, seq=256, batch=8, vocab=8192),
    "large": dict(hidden=1024, layers=12, heads=16, seq=256, batch=8, vocab=50257),
}

# name: (config class, model class, how the config names hidden size, layers, heads, FFN width);
# every model takes input_ids and labels (a seq2seq model makes its decoder inputs from them).
_STD = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
MODELS = {
    "bert": ("BertConfig", "BertForMaskedLM", _STD),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", _STD),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", _STD),
    "albert": ("AlbertConfig", "AlbertForMaskedLM", _STD),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", ("dim", "n_layers", "n_heads", "hidden_dim")),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", ("n_embd", "n_layer", "n_head", "n_inner")),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _STD),
    "llama": ("LlamaConfig", "LlamaForCausalLM", _STD),
    "mistral": ("MistralConfig", "MistralForCausalLM", _STD),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", _STD),
    "opt": ("OPTConfig", "OPTForCausalLM", ("hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim")),
    "bloom": ("BloomConfig", "BloomForCausalLM", ("hidden_size", "n_layer", "n_head", None)),
    "t5": ("T5Config", "T5ForConditionalGeneration", ("d_model", "num_layers", "num_heads", "d_ff")),
    "bart": ("BartConfig", "BartForConditionalGeneration", ("d_model", "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim")),
    "xlm_roberta": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", _STD),
    "megatron_bert": ("MegatronBertConfig", "MegatronBertForMaskedLM", _STD),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", ("n_embd", "n_layer", "n_head", "n_inner")),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", _STD),
}


def build(model: str, size: str, device: str):
    """The model (random weights, dropout on: a random op both sides must draw alike) and its
    inputs, labels included: the loss is computed inside the model, as HF training runs."""
    import transformers as tf
    if model not in MODELS:
        raise SystemExit(f"unknown model {model}; known: {', '.join(MODELS)}")
    s = SIZES[size]
    h, n, a, seq, b, v = s["hidden"], s["layers"], s["heads"], s["seq"], s["batch"], s["vocab"]
    config_cls, model_cls, (kh, kn, ka, kf) = MODELS[model]
    cfg = {kh: h, kn: n, ka: a, "vocab_size": v}
    if kf:
        cfg[kf] = 4 * h
    if model == "t5":
        cfg.update(d_kv=h // a, num_decoder_layers=n, decoder_start_token_id=0, pad_token_id=0)
    if model == "bart":
        cfg.update(decoder_layers=n, decoder_attention_heads=a, decoder_ffn_dim=4 * h, max_position_embeddings=max(512, seq))
    if model in ("bert", "roberta", "electra", "albert", "gpt_neox", "llama", "mistral", "qwen2", "opt", "xlm_roberta",
                 "megatron_bert", "biogpt"):
        cfg["max_position_embeddings"] = max(512, seq + 2)
    if model == "distilbert":
        cfg["max_position_embeddings"] = max(512, seq)
    if model in ("gpt2", "gpt_bigcode"):
        cfg["n_positions"] = max(512, seq)
    if model in ("llama", "mistral", "qwen2"):
        cfg["num_key_value_heads"] = max(1, a // 2)
    if model == "albert":
        cfg["embedding_size"] = min(128, h)
    m = getattr(tf, model_cls)(getattr(tf, config_cls)(**cfg))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, v, (b, seq), generator=g)
    labels = torch.randint(4, v, (b, seq // 2 if model in ("t5", "bart") else seq), generator=g)
    return m.to(device), {"input_ids": ids.to(device), "labels": labels.to(device)}


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
