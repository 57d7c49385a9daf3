"""What parity's C++ side and its Python side must agree on (tools/parity_capture/contract.py):
the results a train run reports, in the same order with the same names, the SGD step and the
seed sent by C++ with each request, one set of Inductor settings for every accuracy run."""
import json
import os

import torch

from conftest import run_parity
from parity_capture import capture, dump_backend
from parity_capture.contract import inductor_settings


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)
        self.drop = torch.nn.Dropout(0.3)
        self.head = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.head(self.drop(torch.tanh(self.fc(x))))


def verify(parity_bin, out, *args):
    r = run_parity(parity_bin, "verify", "--output-dir", str(out), *map(str, args))
    return r, [json.loads(l) for l in open(os.path.join(str(out), "results.jsonl"))]


def test_train_results_agree_between_the_reference_and_the_worker(parity_bin, tmp_path):
    """A dynamo backend in the worker (torch_compile:eager: the same ops, eagerly) against parity's
    C++ reference: every name the C++ side expects comes back from the Python side, in train
    mode for a loss-first capture and for a real program's graph with its recorded gradients;
    dropout draws the same numbers on both sides (the seed comes from C++)."""
    torch.manual_seed(0)
    model = Tiny()
    capture(model, (torch.randn(4, 6),), str(tmp_path / "loss"), mode="train", loss_fn=lambda out: out.pow(2).mean())
    torch._dynamo.reset()
    step = torch.compile(model, backend=dump_backend(str(tmp_path / "program")))
    step(torch.randn(4, 6)).sum().backward()
    torch._dynamo.reset()
    for name in ("loss", "program"):
        r, records = verify(parity_bin, tmp_path / f"out-{name}", tmp_path / name, "--backend", "torch_compile:eager")
        rec = records[0]
        assert rec["verification_code"] == "PASS", r.stdout + r.stderr
        paths = [o["path"] for o in rec["outputs"]]
        assert any(p.startswith("grad/param/") for p in paths) and any(p.startswith("sgd/param/") for p in paths), paths
        assert ("loss" in paths) == (name == "loss")


def test_one_set_of_inductor_settings_for_every_accuracy_run():
    assert inductor_settings({})["fallback_random"] is True
    assert inductor_settings({"max_autotune": "True", "fallback_random": "False"}) == {"max_autotune": True,
                                                                                       "fallback_random": False}
    from parity_capture.profiling.compile import _inductor_patch
    import torch._inductor.config as cfg
    with _inductor_patch({}, {}):  # the profiling child compiles as verify does
        assert cfg.fallback_random is True


class SparseAndComplex(torch.nn.Module):
    """nn.EmbeddingBag(sparse=True), whose weight's gradient autograd makes sparse, and a complex
    parameter (an FNO's spectral weights, a complex-valued net's)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(20, 8, mode="sum", sparse=True)
        self.w = torch.nn.Parameter(torch.randn(4, dtype=torch.cfloat))

    def forward(self, ids, offsets):
        z = torch.view_as_complex(self.emb(ids, offsets).reshape(-1, 4, 2)) * self.w
        return torch.view_as_real(z).square().sum()


def test_sparse_and_complex_gradients_are_compared_on_both_sides(parity_bin, tmp_path):
    """A sparse gradient is reported dense on parity's reference and in the worker alike (it
    ended the reference's experiment with exit 3 in the comparison); a complex parameter is
    differentiated on both sides (both took floating values only: its gradient and SGD step were
    never compared)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    step = torch.compile(SparseAndComplex(), backend=dump_backend(str(tmp_path / "cap")))
    step(torch.randint(0, 20, (9,)), torch.tensor([0, 4])).backward()
    torch._dynamo.reset()
    for backend in ("eager", "torch_compile:eager"):
        r, records = verify(parity_bin, tmp_path / backend.replace(":", "-"), tmp_path / "cap", "--backend", backend)
        assert records[0]["verification_code"] == "PASS", r.stdout + r.stderr
        paths = [o["path"] for o in records[0]["outputs"]]
        assert {"grad/param/emb.weight", "grad/param/w", "sgd/param/w"} <= set(paths), paths
