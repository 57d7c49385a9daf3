"""The graph reader a standalone repro.py runs: the format's constants, tensors in and out of
safetensors, arguments decoded, size expressions of symbolic graphs evaluated, and a graph's JSON
rebuilt as a torch.fx GraphModule.

Needs only torch and safetensors: `parity minify` inlines this file, standalone.py and same.py
into minified/repro.py (repro_script.py), and the package uses the same code (reader.py), so the
script and parity read graphs alike. Reading never executes code from a repro dir: targets
resolve only among torch.ops and operator.getitem. Lines marked `package-only` are left out of
the script."""
import ast
import builtins
import json
import math
import operator

import torch
import torch.fx as fx
from safetensors.torch import load_file, save_file


FORMAT_VERSION = 3  # 3: subgraphs (higher-order ops); 2: symbolic graphs (symbols, guards, sym_shape, sym); 1, 2 read as they are
OLDEST_FORMAT_VERSION = 1
GETITEM = "getitem"
# A run's seed and a train run's SGD step, as parity's C++ reference has them (experiment/reference.h
# ReferenceOptions::seed, kSgdLr; parity sends both with each run request, repro.py runs without it).
SEED = 1337
SGD_LR = 0.01


# Size arithmetic of symbolic graphs: graph target "sym::<name>" -> the Python function.
_SYM_MATH = ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "log2")
SYM_FUNCTIONS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
    "truediv": operator.truediv, "mod": operator.mod, "pow": operator.pow, "neg": operator.neg, "pos": operator.pos,
    "abs": operator.abs, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "and": operator.and_, "or": operator.or_, "not": operator.not_,
    "max": torch.sym_max, "min": torch.sym_min, "float": torch.sym_float, "int": torch.sym_int,
    "ceil": math.ceil, "floor": math.floor, "sym_ite": torch.sym_ite, "round": builtins.round,
    "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift, "sym_not": torch.sym_not,
    "sym_sum": torch.sym_sum,
    # math.<fn> of a size (interpreter/sym_ops.cpp SymOps names the same set)
    **{fn: getattr(math, fn) for fn in _SYM_MATH},
}
# What a captured graph calls for them: dynamo writes math.<fn> of a SymFloat as torch._sym_<fn>,
# which dynamo itself refuses to trace (a symbolic graph's backend compile traces the graph again).
SYM_TARGET_ALIASES = {getattr(torch, "_sym_" + fn): fn for fn in _SYM_MATH}


# safetensors has no complex128 or complex32: such a tensor is stored as its real view (float64
# or float16, a trailing dim of 2) and the file's metadata names it here (docs/format.md).
COMPLEX_METADATA = "parity.complex"
_STORED_AS_REAL = {torch.complex128: "complex128", torch.complex32: "complex32"}


def as_output(v):
    """A graph output as it is stored and compared: a tensor as it is; a number the graph returns
    (a size, `.item()`) a 0-dim int64, float64 or bool tensor (parity's interpreter does the same)."""
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, (bool, torch.SymBool)):
        return torch.tensor(bool(v))
    if isinstance(v, (int, torch.SymInt)):
        return torch.tensor(int(v), dtype=torch.int64)
    if isinstance(v, (float, torch.SymFloat)):
        return torch.tensor(float(v), dtype=torch.float64)
    raise TypeError(f"a graph output of type {type(v).__name__} is neither a tensor nor a number")


# torch dtype -> safetensors' name for it, for the writer below (any other dtype goes through the
# safetensors package's writer).
_SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                       torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
                       torch.bool: "BOOL"}


def save_tensors(path, tensors):
    """Writes tensors (any device, any strides) as one safetensors file, stored contiguous on
    the CPU; complex dtypes safetensors lacks as their real view, named in the metadata. The data
    lies in the order `tensors` gives it."""
    flat, complex_keys = {}, {}
    for k, v in tensors.items():
        v = as_output(v).detach().resolve_conj().resolve_neg()
        if v.dtype in _STORED_AS_REAL:
            complex_keys[k] = _STORED_AS_REAL[v.dtype]
            v = torch.view_as_real(v)
        flat[k] = v
    metadata = {COMPLEX_METADATA: json.dumps(complex_keys)} if complex_keys else None
    if all(v.dtype in _SAFETENSORS_DTYPES for v in flat.values()):
        _write_safetensors(path, _on_host(flat), metadata)
    else:  # a clone: the package refuses tensors that share storage
        save_file({k: v.to("cpu").contiguous().clone() for k, v in flat.items()}, path, metadata=metadata)


def _on_host(tensors):
    """Each tensor contiguous on the CPU. A CUDA tensor is copied into pinned memory without waiting
    for each copy (one synchronize per device holding any); a CPU tensor already contiguous is not
    copied."""
    out, devices = {}, set()
    for k, v in tensors.items():
        if v.device.type == "cuda":
            host = torch.empty(v.shape, dtype=v.dtype, pin_memory=True)
            host.copy_(v, non_blocking=True)
            out[k] = host
            devices.add(v.device)
        else:
            v = v.to("cpu")
            if v._is_zerotensor():  # autograd's zero gradient (sgn's backward): its memory materialized, as a clone does
                v = v.clone()
            out[k] = v.contiguous()
    for d in devices:
        torch.cuda.synchronize(d)
    return out


def _write_safetensors(path, tensors, metadata):
    """The safetensors format (an 8-byte little-endian header length, the JSON header padded with
    spaces to 8 bytes, then each tensor's bytes with no gap) written straight from the tensors'
    memory: no copy beyond the file's."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for k, v in tensors.items():
        n = v.numel() * v.element_size()
        header[k] = {"dtype": _SAFETENSORS_DTYPES[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for v in tensors.values():
            if v.numel():
                f.write(v.reshape(-1).view(torch.uint8).numpy())


def load_tensors(path):
    """save_tensors' file back: key -> tensor, complex ones as complex again."""
    tensors = load_file(path)
    from safetensors import safe_open
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    for k, dtype in json.loads(meta.get(COMPLEX_METADATA, "{}")).items():
        tensors[k] = torch.view_as_complex(tensors[k]).to(getattr(torch, dtype))
    return tensors


def resolve_target(name):
    if name == GETITEM:
        return operator.getitem
    if name.startswith("sym::"):
        return SYM_FUNCTIONS[name[len("sym::"):]]
    if name.startswith("hop::"):  # a higher-order op: torch.ops.higher_order.<name>
        return getattr(torch.ops.higher_order, name[len("hop::"):])
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload or "default")


def decode_arg(a, env, subgraph=None):
    """A JSON argument as FX: node references from `env`; `subgraph(name)` gives the node of a
    subgraph argument (a get_attr of its graph module)."""
    if isinstance(a, list):
        return [decode_arg(x, env, subgraph) for x in a]
    if isinstance(a, dict):
        (tag, v), = a.items()
        if tag == "node":
            return env[v]
        if tag == "subgraph":
            return subgraph(v)
        if tag == "dict":
            return {k: decode_arg(x, env, subgraph) for k, x in v.items()}
        if tag == "float":
            return float(v)
        if tag in ("dtype", "layout", "memory_format"):
            return getattr(torch, v)
        if tag == "device":
            return torch.device(v)
        raise ValueError(f"unknown tag {tag}")
    return a


def _non_overlapping_and_dense(*sizes_strides):
    """c10's is_non_overlapping_and_dense over sizes then strides: dims of size < 2 last, the
    rest by stride, each stride the product of the sizes before it."""
    n = len(sizes_strides) // 2
    sizes, strides = sizes_strides[:n], sizes_strides[n:]
    expected = 1
    for d in sorted(range(n), key=lambda d: (sizes[d] < 2, strides[d] if sizes[d] >= 2 else 0)):
        if sizes[d] < 2:
            return 1
        if strides[d] != expected:
            return 0
        expected *= sizes[d]
    return 1


# The functions of torch's size expressions, as repro/sym_expr.cpp's table evaluates them.
_EXPR_FUNCS = {"Max": max, "Min": min, "Abs": abs, "floor": math.floor, "ceiling": math.ceil,
               "FloorDiv": lambda a, b: a // b, "CleanDiv": lambda a, b: a // b, "CeilDiv": lambda a, b: -(-a // b),
               "Mod": lambda a, b: a % b, "PythonMod": lambda a, b: a % b, "TruncToInt": lambda x: int(math.trunc(x)),
               "IntTrueDiv": lambda a, b: a / b, "FloatTrueDiv": lambda a, b: a / b,
               "Eq": operator.eq, "Ne": operator.ne, "Lt": operator.lt, "Le": operator.le, "Gt": operator.gt,
               "Ge": operator.ge, "And": lambda *a: all(a), "Or": lambda *a: any(a), "Not": operator.not_,
               "Where": lambda c, a, b: a if c else b, "ModularIndexing": lambda x, d, m: (x // d) % m,
               "PowByNatural": operator.pow, "FloatPow": lambda a, b: float(a) ** b, "LShift": operator.lshift,
               "RShift": operator.rshift, "BitwiseFn_bitwise_and": operator.and_, "BitwiseFn_bitwise_or": operator.or_,
               "BitwiseFn_bitwise_xor": operator.xor, "Identity": lambda x: x,
               "IsNonOverlappingAndDenseIndicator": _non_overlapping_and_dense, "FloorToInt": math.floor,
               "CeilToInt": math.ceil, "TruncToFloat": lambda x: float(math.trunc(x)), "RoundToInt": lambda x: int(round(x)),
               "RoundDecimal": lambda x, n: round(float(x), int(n)), "ToFloat": float,
               **{"OpaqueUnaryFn_" + f: getattr(math, f) for f in _SYM_MATH + ("exp", "log")}}
_EXPR_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
                ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow,
                ast.BitAnd: lambda a, b: bool(a) and bool(b), ast.BitOr: lambda a, b: bool(a) or bool(b)}
_EXPR_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
                 ast.Eq: operator.eq, ast.NotEq: operator.ne}


def eval_size(expr, bindings):
    """A size expression of a symbolic graph ("s77", "2*s77", "Max(1, s0)") over `bindings`,
    walked over its syntax tree: reading a repro dir never executes code from it."""
    def walk(n):
        if isinstance(n, ast.Expression):
            return walk(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in bindings:
                raise ValueError(f"size expression {expr!r}: symbol {n.id} is not bound")
            return bindings[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _EXPR_BINOPS:
            return _EXPR_BINOPS[type(n.op)](walk(n.left), walk(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = walk(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert):  # sympy's ~: not
            return not walk(n.operand)
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _EXPR_COMPARE:
            return _EXPR_COMPARE[type(n.ops[0])](walk(n.left), walk(n.comparators[0]))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _EXPR_FUNCS and not n.keywords:
            return _EXPR_FUNCS[n.func.id](*[walk(a) for a in n.args])
        raise ValueError(f"size expression {expr!r}: unsupported form")
    return walk(ast.parse(expr, mode="eval"))


def bind_symbols(gjson, tensors_by_placeholder):
    """A symbolic graph's symbols from its tensor inputs' sizes (as parity's interpreter binds
    them); a symbol no input binds keeps its recorded hint."""
    symbols = gjson.get("symbols") or {}
    bound = {}
    for n in gjson["nodes"]:
        t = tensors_by_placeholder.get(n["name"])
        vals = (n.get("meta") or {}).get("val") or [None]
        m = vals[0] if isinstance(vals, list) and vals else None
        if t is None or not m or not m.get("sym_shape"):
            continue
        for d, name in enumerate(m["sym_shape"]):
            if name in symbols:
                bound.setdefault(name, int(t.shape[d]))
    for name, s in symbols.items():
        bound.setdefault(name, int(s["hint"]))
    return bound


def placeholder_values(gjson, entry, tensors):
    """The values a graph's placeholders take in the recorded call: its input tensors, each in its
    captured layout, and the sizes of a symbolic graph evaluated over its symbols."""
    placeholders = [n for n in gjson["nodes"] if n["op"] == "placeholder"]
    by_name = {n["name"]: captured_layout(tensors[entry["inputs"][n["name"]]], n)
               for n in placeholders if "sym" not in (n.get("meta") or {})}
    bindings = bind_symbols(gjson, by_name)
    out = []
    for n in placeholders:
        meta = n.get("meta") or {}
        if "sym" in meta:
            v = eval_size(meta["sym"], bindings)
            out.append(float(v) if meta.get("sym_type") == "float" else bool(v) if meta.get("sym_type") == "bool" else int(v))
        else:
            out.append(by_name[n["name"]])
    return out


def _dense(shape, stride):
    """Whether `stride` lays out `shape` densely without overlap (size-1 dims: any stride)."""
    expected = 1
    for size, st in sorted(((sz, st) for sz, st in zip(shape, stride) if sz != 1), key=lambda d: d[1]):
        if size == 0 or st != expected:
            return False
        expected *= size
    return True


def captured_layout(t, node):
    """`t` (stored contiguous) in the layout its node recorded at capture (meta.val strides), as
    parity's interpreter restores it: a graph traced on channels_last or transposed inputs may
    hold views legal only on that layout."""
    val = (node.get("meta") or {}).get("val") or [None]
    m = val[0] if isinstance(val, list) else None
    if not m or "stride" not in m or list(t.shape) != list(m["shape"]) or list(t.stride()) == list(m["stride"]):
        return t
    if len(m["stride"]) != t.dim() or not _dense(m["shape"], m["stride"]):
        return t
    return torch.empty_strided(m["shape"], m["stride"], dtype=t.dtype, device=t.device).copy_(t)


def differentiable(t) -> bool:
    """Whether a train run differentiates a value of this dtype: a floating or a complex one (an
    FNO's complex weights); parity's C++ reference asks the same (experiment/reference.cpp)."""
    return t.is_floating_point() or t.is_complex()


def _attr_node(g, root, n, attrs, parameters):
    attr = "_attr_" + "".join(c if c.isalnum() else "_" for c in n["target"])
    if not hasattr(root, attr):
        t = captured_layout(attrs[n["target"]], n)
        wanted = parameters(n["target"]) if callable(parameters) else parameters
        if wanted and n["target"].startswith("param/") and differentiable(t):
            root.register_parameter(attr, torch.nn.Parameter(t.detach().clone()))
        else:
            root.register_buffer(attr, t)
    node = g.get_attr(attr)
    node.meta["parity_target"] = n["target"]
    return node


def graph_from_json(gjson, attrs, parameters=False):
    """Rebuilds a GraphModule. With `parameters` (True, or a predicate over tensor keys), floating
    get_attr tensors under "param/" become nn.Parameters (train mode), the rest buffers. The
    subgraphs higher-order ops take become graph modules of their own, attributes of the module
    holding the op, as torch.export and dynamo leave them."""
    if not OLDEST_FORMAT_VERSION <= (gjson.get("version") or 0) <= FORMAT_VERSION:
        raise ValueError(f"graph format version {gjson.get('version')} is not {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")
    return _module_from_json(gjson, attrs, parameters, top=True)


def _module_from_json(gjson, attrs, parameters, top):
    root, g, env = torch.nn.Module(), fx.Graph(), {}
    subs, sub_nodes = gjson.get("subgraphs") or {}, {}

    def subgraph(name):
        if name not in sub_nodes:
            attr = "".join(c if c.isalnum() else "_" for c in name)
            setattr(root, attr, _module_from_json(subs[name], attrs, parameters, top=False))
            sub_nodes[name] = g.get_attr(attr)
        return sub_nodes[name]

    for n in gjson["nodes"]:
        op = n["op"]
        if op == "placeholder":
            node = g.placeholder(n["name"])
        elif op == "get_attr":
            node = _attr_node(g, root, n, attrs, parameters)
        elif op == "call_function":
            args = tuple(decode_arg(a, env, subgraph) for a in n.get("args", []))
            kwargs = {k: decode_arg(v, env, subgraph) for k, v in n.get("kwargs", {}).items()}
            if n["target"].startswith("hop::"):  # its tuples are tuples (FX would keep lists)
                args = tuple(tuple(a) if isinstance(a, list) else a for a in args)
            node = g.call_function(resolve_target(n["target"]), args, kwargs)
        elif op == "output":
            returned = n["args"][0]
            if top or isinstance(returned, list):
                node = g.output(tuple(decode_arg(a, env) for a in returned))
            else:  # a subgraph returning one value (a flex_attention score function)
                node = g.output(decode_arg(returned, env))
        else:
            raise ValueError(f"unknown op {op}")
        node.name = n["name"]
        if "stack_trace" in n.get("meta", {}):
            node.meta["stack_trace"] = n["meta"]["stack_trace"]
        env[n["name"]] = node
    g.lint()
    return fx.GraphModule(root, g)
