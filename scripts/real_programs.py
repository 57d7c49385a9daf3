"""Real programs captured the way users capture them, `torch.compile(model,
backend=dump_backend(DIR))` around the code as it runs, for the GPU checks (scripts/gpu_real_programs.sh).

    python scripts/real_programs.py OUT_DIR [--device cuda]

writes one repro dir per program under OUT_DIR:
  convnet-bf16     a timm-style convnet (stem, depthwise-separable blocks with squeeze-excite,
                   batch norm, ReLU, global pool, head) in bfloat16, inference
  convnet-fp32     the same in float32 (the relu-bug minify: Triton's injected bug hits its ReLUs)
  convnet-train    its training loop: SGD over three batches, the forward and its gradients
  vit-fp32         a ViT-style block stack on SDPA whose head merge is a .view() (the beit case:
                   legal on the layout CUDA's attention kernels return, not on float64's)
and, where timm is installed (--timm), the models the issue saw, untrained (no weights fetched):
  ghostnet-bf16    timm ghostnet_100 in bfloat16, inference
  ghostnet-fp32    timm ghostnet_100 in float32 (the relu-bug minify)
  beit-fp32        timm beit_base_patch16_224 in float32 (its fp64 reference failed at view_4)
and (issue 30) programs as they train today:
  hf-amp-<name>    a transformers model (default config, 4 layers) trained one step under
                   autocast bf16 with the loss computed inside the model (labels=...)
  adamw-step       a compiled AdamW optimizer.step() (foreach) over a small MLP, three steps
and (issue 32) higher-order ops:
  flex-bf16        a causal flex_attention block (bf16, a causal block mask, an ALiBi score
                   function reading a parameter), inference
  flex-train       the same trained one step (flex_attention's backward: CUDA only)
  cond-fp32        a net whose middle block is a torch.cond on the data
"""
import argparse
import os
import shutil
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from parity_capture import dump_backend  # noqa: E402


class SqueezeExcite(torch.nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.reduce = torch.nn.Conv2d(c, c // r, 1)
        self.expand = torch.nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.expand(F.relu(self.reduce(s))))


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = torch.nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cin)
        self.se = SqueezeExcite(cin)
        self.pw = torch.nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = F.relu(self.bn1(self.dw(x)))
        y = self.bn2(self.pw(self.se(y)))
        return x + y if self.skip else y


class ConvNet(torch.nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        chans = [(32, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2), (128, 128, 1)]
        self.blocks = torch.nn.Sequential(*[Block(a, b, s) for a, b, s in chans])
        self.head = torch.nn.Linear(128, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class Attention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.proj(o.transpose(1, 2).view(b, n, c))  # legal on the fused kernels' layout


class ViT(torch.nn.Module):
    def __init__(self, dim=192, heads=3, depth=4, classes=100):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, dim, 16, 16)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "n1": torch.nn.LayerNorm(dim), "attn": Attention(dim, heads), "n2": torch.nn.LayerNorm(dim),
            "mlp": torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))})
            for _ in range(depth))
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = x + b["attn"](b["n1"](x))
            x = x + b["mlp"](b["n2"](x))
        return self.head(x.mean(1))


def capture_inference(model, x, out, name):
    shutil.rmtree(out, ignore_errors=True)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=dump_backend(out, name))(x)


def capture_training(model, batches, out, name):
    shutil.rmtree(out, ignore_errors=True)
    torch._dynamo.reset()
    step = torch.compile(model, backend=dump_backend(out, name))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches:
        loss = F.cross_entropy(step(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


# transformers models the dynamo benchmark runner trains under --amp (huggingface.py), built from
# their default configs with 4 layers: (class, config overrides, labels: "class" or "tokens").
HF_AMP = {
    "bert": ("BertForSequenceClassification", {"num_hidden_layers": 4}, "class"),
    "albert": ("AlbertForSequenceClassification", {"num_hidden_layers": 4}, "class"),
    "distilbert": ("DistilBertForSequenceClassification", {"n_layers": 4}, "class"),
    "gpt2": ("GPT2ForSequenceClassification", {"n_layer": 4, "pad_token_id": 0}, "class"),
    "t5": ("T5ForConditionalGeneration", {"num_layers": 4, "num_decoder_layers": 4, "decoder_start_token_id": 0}, "tokens"),
    "bart": ("BartForConditionalGeneration", {"encoder_layers": 4, "decoder_layers": 4}, "tokens"),
}


def capture_hf_amp_train(name, out, dev):
    import transformers
    cls, overrides, labels = HF_AMP[name]
    model_cls = getattr(transformers, cls)
    model = model_cls(model_cls.config_class(**overrides)).to(dev).train()
    ids = torch.randint(1, 1000, (4, 64), device=dev)
    y = torch.randint(0, 2, (4,), device=dev) if labels == "class" else torch.randint(1, 1000, (4, 64), device=dev)
    shutil.rmtree(out, ignore_errors=True)
    torch._dynamo.reset()
    step = torch.compile(model, backend=dump_backend(out, f"hf_amp_{name}"))
    with torch.autocast(dev, torch.bfloat16):
        loss = step(input_ids=ids, labels=y).loss
    loss.backward()


def capture_optimizer_step(out, dev):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    shutil.rmtree(out, ignore_errors=True)
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend=dump_backend(out, "adamw_step"))
    for _ in range(3):
        model(torch.randn(16, 64, device=dev)).pow(2).mean().backward()
        step()
        opt.zero_grad()


class FlexBlock(torch.nn.Module):
    """Attention as new LLM code writes it: flex_attention with a causal block mask and an
    ALiBi-style score function reading a parameter, then a projection."""

    def __init__(self, dim=256, heads=8):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.slopes = torch.nn.Parameter(torch.logspace(-1, -3, heads))

    def forward(self, x, block_mask):
        from torch.nn.attention.flex_attention import flex_attention
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)
        y = flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


def capture_flex(out, dev, train):
    from torch.nn.attention.flex_attention import create_block_mask
    model = FlexBlock().to(dev, torch.bfloat16).train(train)
    x = torch.randn(4, 512, 256, device=dev, dtype=torch.bfloat16)
    mask = create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 512, 512, device=dev)
    shutil.rmtree(out, ignore_errors=True)
    torch._dynamo.reset()
    step = torch.compile(model, backend=dump_backend(out, "flex_block"))
    if train:
        step(x, mask).float().pow(2).mean().backward()
    else:
        with torch.no_grad():
            step(x, mask)


class CondNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(256, 256), torch.nn.Linear(256, 10)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.cond(h.mean() > -1, lambda t: torch.relu(t * 3) - 0.5, lambda t: t.sin(), (h,))
        return self.b(h)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timm", action="store_true", help="also capture timm's ghostnet_100 and beit_base_patch16_224")
    ap.add_argument("--only", nargs="*", help="capture only these programs")
    a = ap.parse_args(argv)
    want = lambda name: not a.only or name in a.only
    dev = a.device
    torch.manual_seed(0)
    images = torch.randn(8, 3, 224, 224, device=dev)
    t0 = time.time()
    done = []

    def run(name, fn):
        if want(name):
            torch.manual_seed(0)
            try:
                fn(os.path.join(a.out, name))
            except Exception as e:  # one program that cannot run here does not stop the others
                print(f"{name}: not captured ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
                return
            done.append(name)

    run("convnet-bf16", lambda d: capture_inference(ConvNet().to(dev, torch.bfloat16).eval(), images.to(torch.bfloat16), d,
                                                    "convnet_bf16"))
    run("convnet-fp32", lambda d: capture_inference(ConvNet().to(dev).eval(), images, d, "convnet"))
    batches = [(torch.randn(8, 3, 224, 224, device=dev), torch.randint(0, 100, (8,), device=dev)) for _ in range(3)]
    run("convnet-train", lambda d: capture_training(ConvNet().to(dev).train(), batches, d, "convnet_train"))
    run("vit-fp32", lambda d: capture_inference(ViT().to(dev).eval(), images, d, "vit"))
    if a.timm:
        import timm
        model = lambda name: timm.create_model(name, pretrained=False).to(dev).eval()
        run("ghostnet-bf16", lambda d: capture_inference(model("ghostnet_100").to(torch.bfloat16), images.to(torch.bfloat16), d,
                                                         "ghostnet_100"))
        run("ghostnet-fp32", lambda d: capture_inference(model("ghostnet_100"), images, d, "ghostnet_100"))
        run("beit-fp32", lambda d: capture_inference(model("beit_base_patch16_224"), images, d, "beit_base_patch16_224"))
    for name in HF_AMP:
        run(f"hf-amp-{name}", lambda d, name=name: capture_hf_amp_train(name, d, dev))
    run("adamw-step", lambda d: capture_optimizer_step(d, dev))
    run("flex-bf16", lambda d: capture_flex(d, dev, False))
    run("flex-train", lambda d: capture_flex(d, dev, True))
    run("cond-fp32", lambda d: capture_inference(CondNet().to(dev).eval(), torch.randn(64, 256, device=dev), d, "condnet"))
    print(f"captured {', '.join(done)} on {dev} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
