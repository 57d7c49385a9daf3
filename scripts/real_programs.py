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
            fn(os.path.join(a.out, name))
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
    print(f"captured {', '.join(done)} on {dev} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
