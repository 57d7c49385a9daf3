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


def _t(dtype, shape):
    return {"val": [{"dtype": dtype, "shape": shape, "stride": [1] * len(shape)}]}


def _ph(name, dtype="float32", shape=(4, 8)):
    return {"name": name, "op": "placeholder", "meta": _t(dtype, list(shape))}


def _call(name, target, args, dtype="float32", shape=(4, 8)):
    return {"name": name, "op": "call_function", "target": target, "args": args, "meta": _t(dtype, list(shape))}


def _out(*names):
    return {"name": "output", "op": "output", "args": [[{"node": n} for n in names]]}


def _branch(op):
    return {"nodes": [_ph("a"), _call("r", op, [{"node": "a"}]), _out("r")]}


def seeds_graph_hops(testdata, out):
    """Format-3 graphs calling each kind of higher-order op (fuzz_graph_hops mutates their
    structure): a cond, a cond in a cond's branch, a while_loop, a scan, an invoke_subgraph."""
    top = [_ph("x"), _call("s", "aten::sum", [{"node": "x"}], shape=[]), _call("p", "aten::gt.Scalar", [{"node": "s"}, 0], "bool", [])]
    cond = {"version": 3, "name": "cond", "subgraphs": {"t": _branch("aten::relu"), "f": _branch("aten::sin")},
            "nodes": top + [_call("c", "hop::cond", [{"node": "p"}, {"subgraph": "t"}, {"subgraph": "f"}, [{"node": "x"}]]),
                            _call("g", "getitem", [{"node": "c"}, 0]), _out("g")]}
    nested = json.loads(json.dumps(cond))
    nested["name"] = "nested"
    inner = nested["subgraphs"]["t"]
    inner["subgraphs"] = {"t2": _branch("aten::tanh"), "f2": _branch("aten::cos")}
    inner["nodes"] = [_ph("a"), _call("q", "aten::sum", [{"node": "a"}], shape=[]),
                      _call("qp", "aten::lt.Scalar", [{"node": "q"}, 1], "bool", []),
                      _call("c2", "hop::cond", [{"node": "qp"}, {"subgraph": "t2"}, {"subgraph": "f2"}, [{"node": "a"}]]),
                      _call("g2", "getitem", [{"node": "c2"}, 0]), _out("g2")]
    i64 = ("int64", ())
    loop = {"version": 3, "name": "loop",
            "subgraphs": {"cond": {"nodes": [_ph("i", *i64), _ph("y"), _call("lt", "aten::lt.Scalar", [{"node": "i"}, 4], "bool", []),
                                             {"name": "output", "op": "output", "args": [{"node": "lt"}]}]},
                          "body": {"nodes": [_ph("i", *i64), _ph("y"), _call("i1", "aten::add.Tensor", [{"node": "i"}, 1], *i64),
                                             _call("t", "aten::tanh", [{"node": "y"}]), _out("i1", "t")]}},
            "nodes": [_ph("x"), _call("z", "aten::scalar_tensor", [0], *i64),
                      dict(_call("w", "hop::while_loop", [{"subgraph": "cond"}, {"subgraph": "body"}, [{"node": "z"}, {"node": "x"}], []]),
                           meta={"val": [{"dtype": "int64", "shape": [], "stride": []}, {"dtype": "float32", "shape": [4, 8], "stride": [8, 1]}],
                                 "iterations": 4}),
                      _call("g", "getitem", [{"node": "w"}, 1]), _out("g")]}
    scan = {"version": 3, "name": "scan",
            "subgraphs": {"f": {"nodes": [_ph("h", shape=(2, 8)), _ph("x", shape=(2, 8)),
                                          _call("a", "aten::add.Tensor", [{"node": "h"}, {"node": "x"}], shape=[2, 8]),
                                          _call("t", "aten::tanh", [{"node": "a"}], shape=[2, 8]), _out("t", "t")]}},
            "nodes": [_ph("h0", shape=(2, 8)), _ph("xs", shape=(5, 2, 8)),
                      _call("s", "hop::scan", [{"subgraph": "f"}, [{"node": "h0"}], [{"node": "xs"}], []], shape=[2, 8]),
                      _call("g", "getitem", [{"node": "s"}, 0], shape=[2, 8]), _out("g")]}
    invoke = {"version": 3, "name": "invoke", "subgraphs": {"b": _branch("aten::relu")},
              "nodes": [_ph("x"), _call("i", "hop::invoke_subgraph", [{"subgraph": "b"}, "block", {"node": "x"}]),
                        _call("g", "getitem", [{"node": "i"}, 0]), _out("g")]}
    for g in (cond, nested, loop, scan, invoke):
        write(out, json.dumps(g, indent=1).encode())


SEEDERS = {"safetensors": seeds_safetensors, "graph_json": seeds_graph_json, "manifest": seeds_manifest,
           "compare": seeds_compare, "graph_hops": seeds_graph_hops}


def main(argv):
    if len(argv) != 4 or argv[1] not in SEEDERS:
        sys.exit(f"usage: {argv[0]} {{{','.join(SEEDERS)}}} TESTDATA OUT_DIR")
    out = pathlib.Path(argv[3])
    out.mkdir(parents=True, exist_ok=True)
    SEEDERS[argv[1]](pathlib.Path(argv[2]), out)
    print(f"seeds.py: {sum(1 for _ in out.iterdir())} seeds for fuzz_{argv[1]} in {out}")


if __name__ == "__main__":
    main(sys.argv)
