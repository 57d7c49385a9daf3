"""Seed corpora for the fuzz targets, made from the test fixtures (tests/gen_test_data.py's
captures and the same() conformance corpus). Standard library only.

    python3 fuzz/seeds.py TARGET TESTDATA OUT_DIR

Seeds are kept small (a few KB) so that each execution is fast: large fixtures are cut to their
first nodes or first tensors, which keeps their variety of ops, dtypes and shapes.
"""
import hashlib
import json
import pathlib
import struct
import sys

MAX_TENSOR_BYTES = 4096


def write(out: pathlib.Path, data: bytes) -> None:
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def read_safetensors(path: pathlib.Path):
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", None)
    data = blob[8 + n :]
    tensors = [(k, v["dtype"], v["shape"], data[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()]
    tensors.sort(key=lambda t: header[t[0]]["data_offsets"][0])
    return tensors, meta


def encode_safetensors(tensors, meta=None) -> bytes:
    header, offset, payload = {}, 0, b""
    if meta:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        payload += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # aligned data, as the reference writer pads
    return struct.pack("<Q", len(text)) + text + payload


def small_tensor_sets(testdata: pathlib.Path):
    """Groups of small tensors from every fixture file: one group per dtype, then runs of 4."""
    for path in sorted(testdata.rglob("*.safetensors")):
        tensors, meta = read_safetensors(path)
        small = [t for t in tensors if len(t[3]) <= MAX_TENSOR_BYTES]
        by_dtype = {}
        for t in small:
            by_dtype.setdefault(t[1], []).append(t)
        for group in by_dtype.values():
            yield group[:3], meta
        for i in range(0, min(len(small), 32), 4):
            yield small[i : i + 4], None


def seeds_safetensors(testdata, out):
    for group, meta in small_tensor_sets(testdata):
        write(out, encode_safetensors(group, meta))


def seeds_graph_json(testdata, out):
    for path in sorted(testdata.rglob("graphs/*.json")):
        graph = json.loads(path.read_text())
        nodes = graph["nodes"]
        if len(path.read_bytes()) <= 16384:
            write(out, path.read_bytes())
        # Prefixes: the nodes up to the k-th call and an output returning that call.
        call_at = [i for i, n in enumerate(nodes) if n["op"] == "call_function"]
        for k in (2, 4, 8, 16, 32):
            if k > len(call_at):
                break
            body = nodes[: call_at[k - 1] + 1]
            calls = [n["name"] for n in body if n["op"] == "call_function"]
            cut = dict(graph, nodes=body + [{"name": "output", "op": "output", "args": [[{"node": calls[-1]}]]}])
            write(out, json.dumps(cut, indent=1).encode())


def seeds_manifest(testdata, out):
    for path in sorted(testdata.rglob("manifest.json")):
        write(out, path.read_bytes())
        manifest = json.loads(path.read_text())
        # The same manifest with the optional sections filled, so mutations start from them.
        manifest.update(backend="inductor", backend_options={"mode": "max-autotune"}, suite="huggingface",
                        batch_size=2, failure={"verification_code": "FAIL_ACCURACY", "signature": {"stage": "backend"}},
                        host_ops={"mylib::scale.default": {"schema": "mylib::scale(Tensor x, float s) -> Tensor",
                                                           "module": "mylib", "path": "host"}})
        write(out, json.dumps(manifest, indent=2).encode())


# fuzz_compare.cpp's layout: 8 header bytes, then the data of ref, res and the fp64 reference.
COMPARE_DTYPES = ["BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "BF16", "F32", "F64",
                  "C64", "F8_E4M3", "F8_E5M2"]


def seeds_compare(testdata, out):
    for group, _ in small_tensor_sets(testdata):
        for name, dtype, shape, raw in group[:2]:
            if dtype not in COMPARE_DTYPES or len(shape) > 3 or any(d > 7 for d in shape):
                continue
            dims = (list(shape) + [0, 0, 0])[:3]
            for bits in (0x04, 0x84, 0x85, 0x86):  # exact dtype; + fp64 reference; + cosine; + equal_nan
                header = bytes([COMPARE_DTYPES.index(dtype), 0, bits, 1, len(shape), *dims])
                write(out, header + raw + raw[::-1] + raw)


SEEDERS = {"safetensors": seeds_safetensors, "graph_json": seeds_graph_json, "manifest": seeds_manifest,
           "compare": seeds_compare}


def main(argv):
    if len(argv) != 4 or argv[1] not in SEEDERS:
        sys.exit(f"usage: {argv[0]} {{{','.join(SEEDERS)}}} TESTDATA OUT_DIR")
    out = pathlib.Path(argv[3])
    out.mkdir(parents=True, exist_ok=True)
    SEEDERS[argv[1]](pathlib.Path(argv[2]), out)
    print(f"seeds.py: {sum(1 for _ in out.iterdir())} seeds for fuzz_{argv[1]} in {out}")


if __name__ == "__main__":
    main(sys.argv)
