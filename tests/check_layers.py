"""The rooms' layering (ARCHITECTURE.md): an #include of another room only runs down the list,
so no include runs upward and no folders form a loop; and the same for the Python package
(tools/parity_capture): a module imports, at its top or inside a function, only modules of a
layer below its own, so the package has no circle. Exit 1 naming each offending include or import.

    python tests/check_layers.py SOURCE_DIR
"""
import os
import re
import sys

# Lowest first; rooms on one line may not include each other.
LAYERS = [["util"], ["repro"], ["interpreter", "compare"], ["results"], ["runtime"], ["host_ops"], ["experiment"], ["matrix"], ["verify"],
          ["distributed"], ["minifier"], ["profile", "ci", "report"], ["cli"]]
OUTSIDE = {"tests", "fuzz", "bench"}  # may include any room

# The Python package's modules, lowest first (a dotted name also places the modules under it;
# an exact name wins): a module imports only modules of a layer below its own, and every module
# has a layer.
PY_PACKAGE = os.path.join("tools", "parity_capture")
PY_LAYERS = [
    # the format's graph reader (standalone_graph, inlined into repro.py), errors, leaves
    ["errors", "ending", "bytecode", "lowered", "standalone_graph", "same", "shm", "models", "report", "checkpointed", "backends.exported", "warm", "distributed",
     "compiled_autograd",
     "profiling", "profiling.categories", "profiling.timing", "profiling.trace"],
    ["standalone", "functionalized", "differentiable", "host_ops", "profiling.provenance"],  # the standalone runs (repro.py's check)
    ["standalone_ranks"],  # a rank for real, standalone (the group; a multi-rank minimum's repro.py under torchrun)
    ["loops", "reader", "contract", "repro_script", "replay_check"],  # what both sides share; the package's reader
    ["serialize", "runs", "profiling.compile", "profiling.kineto"],  # the writer; a stored graph run
    ["symbolic_lowering", "backends", "profiling.kernel"],  # symbolic graphs; the backends' Python sides
    ["lowering", "compiler_bisect", "profiling.run"],  # lowering to the format; bisection
    ["backward_graph"],  # a train graph's backward as a graph of its own
    ["recording"],  # what the dump backend records
    ["dynamo_backend"],  # the dump backend: its hooks into the program
    ["capture", "profiling.__main__", "rank_replay"],  # the front doors: capture(), the profiling child
    ["import_repro"],  # PyTorch's repro scripts, through capture()
    ["worker", "__main__", "__init__"],  # the worker's request table, the CLI, the package's API
    ["forkserver"],  # forks workers from one import of the worker's modules
]


def level(room):
    return next((i for i, rooms in enumerate(LAYERS) if room in rooms), None)


def offending(root):
    bad = []
    for rooms in LAYERS:
        for room in rooms:
            for dirpath, _, files in os.walk(os.path.join(root, room)):
                for f in files:
                    if not f.endswith((".h", ".cpp", ".def")):
                        continue
                    path = os.path.join(dirpath, f)
                    for n, line in enumerate(open(path, errors="replace"), 1):
                        m = re.match(r'\s*#\s*include\s+"([^/"]+)/', line)
                        if not m or m.group(1) == room or m.group(1) in OUTSIDE:
                            continue
                        target = level(m.group(1))
                        if target is None:
                            continue
                        if target >= level(room):
                            rel = os.path.relpath(path, root)
                            bad.append(f"{rel}:{n}: {room}/ includes {m.group(1)}/ ({line.strip()}), which is not below it")
    return bad


def py_modules(root):
    """{dotted module name: path} of the Python package ("__init__" for its own __init__.py)."""
    base = os.path.join(root, PY_PACKAGE)
    out = {}
    for dirpath, _, files in os.walk(base):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), base)[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[: -len(".__init__")]
                out[rel] = os.path.join(dirpath, f)
    return out


def py_level(mod):
    for i, names in enumerate(PY_LAYERS):
        if mod in names:
            return i
    parts = mod.split(".")
    for k in range(len(parts) - 1, 0, -1):
        for i, names in enumerate(PY_LAYERS):
            if ".".join(parts[:k]) in names:
                return i
    return None


def py_imports(mod, path, modules):
    """(line, imported module) of each relative import of `mod`, functions' own included."""
    import ast
    package = [] if mod == "__init__" else mod.split(".")[:-1] if not path.endswith("__init__.py") else mod.split(".")
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        if node.module:
            target = ".".join(base + node.module.split("."))
            subs = [target + "." + a.name for a in node.names if target + "." + a.name in modules]
            for t in subs or [target]:
                yield node.lineno, t
        else:
            for a in node.names:
                yield node.lineno, ".".join(base + [a.name])


def py_offending(root):
    modules = py_modules(root)
    bad = []
    for mod, path in sorted(modules.items()):
        rel = os.path.relpath(path, root)
        mine = py_level(mod)
        if mine is None:
            bad.append(f"{rel}: module {mod} has no layer in check_layers.py's PY_LAYERS")
            continue
        for line, target in py_imports(mod, path, modules):
            theirs = py_level(target)
            if theirs is not None and theirs >= mine:
                bad.append(f"{rel}:{line}: {mod} imports {target}, which is not below it")
    return bad


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    missing = [r for rooms in LAYERS for r in rooms if not os.path.isdir(os.path.join(root, r))]
    if missing:
        print("check_layers: no such room: " + ", ".join(missing))
        return 1
    bad = offending(root) + py_offending(root)
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} include(s) or import(s) against the layering")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
