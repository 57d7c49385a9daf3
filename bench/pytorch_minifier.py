"""PyTorch's minifier on the relu accuracy bug, as its users run it: TORCHDYNAMO_REPRO_AFTER=aot
and TORCHDYNAMO_REPRO_LEVEL=4 make the failing run dump minifier_launcher.py, then
`python minifier_launcher.py minify` shrinks it. Prints one JSON line with the timings, the
number of queries ("Made N queries") and the call_function count of the final repro.

    python bench/pytorch_minifier.py --model relunet --blocks 12 --workdir /tmp/pm [--device cuda]

Models: relunet (tests/python/relu_model.py), block (tests/python/block_model.py: transformer
blocks, the relu late), or a suite model by name (parity_capture.models, e.g. resnet).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

DETECT = r'''
import os, sys, torch
sys.path.insert(0, {tests!r})
sys.path.insert(0, {tools!r})
import torch._dynamo.config, torch._inductor.config
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
torch._dynamo.config.debug_dir_root = {workdir!r}
device = {device!r}
# The knob of the code Inductor generates for the device: C++ on the CPU, Triton on a GPU.
if device == "cpu":
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
else:
    torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
name = {model!r}
if name == "relunet":
    from relu_model import ReluNet
    torch.manual_seed(0)
    m, args = ReluNet({blocks}), (torch.randn(8, 32, generator=torch.Generator().manual_seed(1)),)
elif name == "block":
    from block_model import build
    m, args = build()
else:
    from parity_capture import models
    _, m, args, _ = models.build(name)
m.eval()
m = m.to(device)
args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
try:
    with torch.no_grad():
        torch.compile(m, backend="inductor")(*args)
    print("NO_FAILURE_DETECTED")
except Exception as e:
    print("DETECTED", type(e).__name__)
'''


def count_call_functions(repro_py: str) -> int:
    text = open(repro_py).read()
    fwd = text[text.find("def forward"):]
    fwd = fwd[: fwd.find("\ndef ", 10)] if "\ndef " in fwd[10:] else fwd
    return len(re.findall(r"torch\.ops\.aten\.\w+", fwd))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="relunet")
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=int, default=3000)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (Triton's relu knob)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tests, tools = os.path.join(root, "tests", "python"), os.path.join(root, "tools")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(a.workdir, "inductor-cache"))
    t0 = time.perf_counter()
    d = subprocess.run([sys.executable, "-c", DETECT.format(tests=tests, tools=tools, workdir=a.workdir, blocks=a.blocks, model=a.model, device=a.device)],
                       capture_output=True, text=True, env=env, timeout=a.timeout, cwd=a.workdir)  # its repro.py lands there
    detect_s = time.perf_counter() - t0
    launchers = sorted(glob.glob(os.path.join(a.workdir, "**", "minifier_launcher.py"), recursive=True))
    out = {"model": a.model, "blocks": a.blocks, "detect_s": detect_s, "detected": "DETECTED" in d.stdout, "launcher": bool(launchers)}
    if not launchers:
        out["error"] = (d.stdout + d.stderr)[-1500:]
        print(json.dumps(out))
        return 1
    launcher = launchers[-1]
    t0 = time.perf_counter()
    try:
        mr = subprocess.run([sys.executable, launcher, "minify"], capture_output=True, text=True, env=env,
                            cwd=os.path.dirname(launcher), timeout=a.timeout)
    except subprocess.TimeoutExpired:  # a lower bound of its time, said as such
        out.update(minify_s=time.perf_counter() - t0, timed_out=True)
        print(json.dumps(out))
        return 1
    out["minify_s"] = time.perf_counter() - t0
    log = mr.stdout + mr.stderr
    q = re.findall(r"Made (\d+) queries", log)
    out["queries"] = int(q[-1]) if q else None
    repros = sorted(glob.glob(os.path.join(a.workdir, "**", "repro.py"), recursive=True), key=os.path.getmtime)
    out["final_call_functions"] = count_call_functions(repros[-1]) if repros else None
    out["minify_rc"] = mr.returncode
    if out["queries"] is None:
        out["log_tail"] = log[-1500:]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
