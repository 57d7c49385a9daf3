"""save_tensors (tools/parity_capture/standalone_graph.py): the worker's results, a capture's
tensors and repro.py's outputs are written by it, read by parity's C++ reader and by the
safetensors package alike."""
import json
import os
import struct
import sys

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
from parity_capture.standalone_graph import load_tensors, save_tensors  # noqa: E402


def _written(path):
    """The file's header and how many bytes of data follow it."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        return header, os.path.getsize(path) - 8 - n, n


def test_every_layout_is_written_contiguous_and_reads_back_equal(tmp_path):
    base = torch.randn(4, 6)
    tensors = {"transposed": torch.randn(3, 4).t(), "scalar": torch.tensor(3.5, dtype=torch.float64),
               "empty": torch.empty(0, 5, dtype=torch.bfloat16), "complex128": torch.randn(2, 2, dtype=torch.complex128),
               "bool": torch.tensor([True, False, True]), "strided": torch.arange(9)[::2], "number": 7,
               "shares_a": base[1:3], "shares_b": base[:, 2], "negated": torch._neg_view(torch.randn(3)),
               "bf16": torch.randn(7, dtype=torch.bfloat16), "zero": torch._efficientzerotensor(2, 3)}
    path = str(tmp_path / "t.safetensors")
    save_tensors(path, tensors)
    back = load_tensors(path)
    assert list(back) == list(tensors)
    for k, v in tensors.items():
        v = torch.tensor(v) if not isinstance(v, torch.Tensor) else v.resolve_neg()
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
    # The file as the format has it: the data in the order given, with no gap, after a header
    # padded to 8 bytes (the safetensors package refuses a file with holes).
    header, data_bytes, header_bytes = _written(path)
    assert header_bytes % 8 == 0
    spans = [header[k]["data_offsets"] for k in tensors]
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] == data_bytes
    assert set(load_file(path)) == set(tensors)


def test_a_dtype_the_own_writer_lacks_goes_through_the_package(tmp_path):
    tensors = {"c64": torch.randn(3, dtype=torch.complex64), "conj": torch.randn(2, dtype=torch.complex64).conj(),
               "f32": torch.randn(2, 2)}
    path = str(tmp_path / "t.safetensors")
    save_tensors(path, tensors)
    back = load_tensors(path)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v.resolve_conj()), k
