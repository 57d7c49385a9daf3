"""PyTorch's op database as a yardstick nobody here wrote (bench/opinfo.py, docs/benchmarks.md):
a fixed sample of OpInfos, each captured from its first CPU sample, replayed by parity's
interpreter and compared with Python eager, forward in float32 and bfloat16 and backward in
float32; the failure classes found in the whole database are here too (random ops, special
functions with NaN outputs, data-dependent output sizes, ops torch registers from Python,
numbers as outputs, values read out of tensors while tracing, complex128/complex32)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import opinfo  # noqa: E402

FIXED = [
    # elementwise, reductions, matmuls, shapes and indexing, convolution and norms
    "add", "mul", "div", "sin", "exp", "sigmoid", "nn.functional.gelu", "where", "clamp",
    "sum", "mean", "var", "softmax", "logsumexp", "cumsum", "amax", "sort", "topk",
    "mm", "matmul", "addmm", "bmm", "einsum",
    "index_put", "scatter", "gather", "index_select", "cat", "reshape", "transpose", "narrow", "as_strided",
    "nn.functional.conv2d", "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.embedding",
    "nn.functional.cross_entropy", "nn.functional.scaled_dot_product_attention",
    # random ops: compared by shape, dtype and layout
    "normal", "uniform", "bernoulli", "randn_like", "nn.functional.dropout", "nn.functional.rrelu", "empty_like",
    # special functions whose outputs hold NaN/Inf: a bitwise-equal replay matches
    "special.zeta", "igamma", "special.bessel_j0", "special.i0e",
    # data-dependent output sizes
    "nonzero", "masked_select", "unique",
    # factories and dtype-pinning ops
    "zeros_like", "full_like", "new_zeros", "arange",
    # an op torch registers from Python, with a ScalarType argument (runs in the worker, no --import)
    "nn.functional.linear_cross_entropy",
    # a backward that returns a ZeroTensor (no storage)
    "sgn",
    # a number as the output (.item(): a data-dependent float), a value read out of a tensor in
    # Python while tracing (cov: torch.equal), an op reading a tensor argument's data
    # (tensor_split by a tensor of indices), complex outputs safetensors has no dtype for
    "item", "cov", "tensor_split", "cdouble", "chalf",
]


# Forwards captured by torch.export (capture()'s first path, the one user models take): the
# composite ops, which its run_decompositions lowers, and `item`, a number make_fx would bake into
# the trace as a constant. The rest go through make_fx, whose trace replays the same ATen calls at
# a fraction of the cost (export's decomposition table alone is about 0.35 s a capture, measured).
EXPORTED = {"matmul", "einsum", "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.cross_entropy",
            "nn.functional.scaled_dot_product_attention", "nn.functional.linear_cross_entropy", "nn.functional.dropout",
            "nn.functional.rrelu", "reshape", "narrow", "tensor_split", "cov", "item"}


@pytest.fixture(scope="module")
def rows(parity_bin, tmp_path_factory):
    ops = opinfo.select_ops(FIXED, None)
    missing = set(FIXED) - {op.name for op in ops}
    assert not missing, f"not OpInfos of this torch: {missing}"
    assert EXPORTED <= set(FIXED), EXPORTED - set(FIXED)
    torch.set_num_threads(1)
    return opinfo.run(parity_bin, ops, [torch.float32, torch.bfloat16], 1, 2, str(tmp_path_factory.mktemp("opinfo")),
                      export_when=lambda op, dtype: op.name in EXPORTED and (dtype == torch.float32 or op.name == "item"))


def test_every_sample_python_runs_replays_and_matches(rows):
    counted = [r for r in rows if r["cls"] not in opinfo.NOT_COUNTED]
    assert len(counted) >= 100, len(counted)
    failing = [(r["op"], r["dtype"], r["pass"], r["cls"], r.get("why")) for r in counted if r["cls"] not in opinfo.MATCHES]
    assert not failing, failing


def test_the_fp64_reference_runs_wherever_pythons_float64_does(rows):
    missing = [(r["op"], r["dtype"], r["pass"]) for r in rows if r["cls"] in opinfo.MATCHES and r["fp64_in_python"] and not r["fp64"]]
    assert not missing, missing


def test_backwards_are_checked(rows):
    backward = {r["op"] for r in rows if r["pass"] == "backward" and r["cls"] in opinfo.MATCHES}
    assert {"mul", "nn.functional.conv2d", "softmax", "index_put"} <= backward, backward


def test_failure_classes_end_where_they_should(rows):
    cls = {(r["op"], r["dtype"], r["pass"]): r["cls"] for r in rows}
    # continuous distributions: a replay draws other numbers, compared by shape, dtype and layout
    for op in ("normal", "uniform", "randn_like"):
        assert cls[(op, "float32", "forward")] == "match_random", (op, cls[(op, "float32", "forward")])
    # bernoulli of probabilities 0 and 1 may repeat eager bit for bit: either way it matches
    assert cls[("bernoulli", "float32", "forward")] in ("match_random", "match_bitwise")
    for op in ("special.zeta", "igamma"):
        assert cls[(op, "float32", "forward")] == "match_bitwise", (op, cls[(op, "float32", "forward")])
    assert cls[("nonzero", "float32", "forward")] == "match_bitwise"


def test_the_table_counts_what_it_says(rows):
    text = opinfo.table(rows)
    assert "| float32 forward |" in text and "| float32 backward |" in text and "| bfloat16 forward |" in text, text
