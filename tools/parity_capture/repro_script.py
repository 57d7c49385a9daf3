"""Writes the standalone repro.py of a minified repro dir: same.py, standalone_graph.py and standalone.py inlined (no
parity import at run time, only torch and safetensors), the dynamo backend to compile with, and
a call of standalone.main on the script's own directory; for a minimum reduced across ranks
(write_world_script) standalone_ranks.py too, and a call of its torchrun_main.

Text only: it imports neither torch nor the package (the modules it inlines are read as files), so
`parity minify` runs it as a script (`python repro_script.py '<request JSON>'`) in a fraction of a
second instead of starting a worker for it (runtime/tool_script.h)."""
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _body(module: str) -> str:
    with open(os.path.join(_HERE, module + ".py")) as f:
        return "".join(line for line in f if not line.rstrip().endswith("# package-only"))


def _inlined(*modules: str) -> str:
    """The package's torch-free modules the script carries, each under a line naming it."""
    return "\n".join(f"# ---- {m}.py ----\n" + _body(m) for m in modules)


def _plugin_imports(imports) -> str:
    """The modules parity imported to compile or run the graph (--import's, host ops'), found as
    parity's own processes found them: `python -m` puts the working directory first on sys.path,
    a script's run puts the script's directory there instead."""
    if not imports:
        return ""
    return ("import os as _os, sys as _sys\n"
            "_sys.path.insert(0, _os.getcwd())  # where `parity` found them: run this from the directory it ran in\n"
            + "".join(f"import {m}  # --import or a host op's module: what the failure was found with\n" for m in imports))


def _culprit_hint(culprit) -> str:
    """Commented lines saying which part of the compiler the failure comes from (parity minify's
    compiler bisection) and the line that removes it: a config setting where one does, else the
    bisector's own switches holding the subsystem below the culprit's application."""
    if not culprit or not culprit.get("subsystem"):
        return ""
    lines = [f"# compiler culprit: {culprit.get('sentence', '')}"]
    if culprit.get("config"):
        lines.append(f"# it goes away with:  {culprit['config']}")
    else:
        stage = "inductor" if culprit.get("backend") not in ("aot_eager_decomp_partition",) else culprit["backend"]
        lines += ["# it goes away with the bisector holding that subsystem below the culprit's application:",
                  "#   from torch._inductor.compiler_bisector import CompilerBisector; CompilerBisector.bisection_enabled = True",
                  f"#   and in the environment: TORCH_BISECT_BACKEND={stage} TORCH_BISECT_SUBSYSTEM={culprit['subsystem']} "
                  f"TORCH_BISECT_MAX={int(culprit.get('bisect_number') or 0) - 1}"]
    return "\n".join(lines) + "\n"


def write_script(repro_dir: str, dynamo_backend: str, out: str, compiler_culprit=None, imports=()) -> str:
    with open(os.path.join(repro_dir, "manifest.json")) as f:
        manifest = json.load(f)
    backend = manifest.get("backend", {})
    header = (
        "#!/usr/bin/env python3\n"
        f"# Standalone repro written by `parity minify` for backend {backend.get('name')} {json.dumps(backend.get('options', {}))}\n"
        f"# failure: {json.dumps(manifest.get('failure'))}\n"
        "# Runs the graph in this directory eagerly, in float64 and with the backend, checks as\n"
        "# torch._dynamo.utils.same does, and exits 1 when the bug reproduces. Needs torch and safetensors.\n"
        + _culprit_hint(compiler_culprit)
        + _plugin_imports(imports)
        + f"DYNAMO_BACKEND = {json.dumps(dynamo_backend or None).replace('null', 'None')}\n\n")
    tail = ("\n\nif __name__ == \"__main__\":\n"
            "    import sys\n"
            "    sys.exit(main(os.path.dirname(os.path.abspath(__file__)), DYNAMO_BACKEND))\n")
    return _write(out, header + _inlined("same", "standalone_graph", "standalone") + tail)


def write_world_script(out, dynamo_backend, options, tol, world_size, title, imports=(), compiler_culprit=None) -> str:
    """repro.py beside a minimum reduced across ranks (minifier/across_ranks.h), `out`'s dir holding
    the multi-rank dir `world/`: same.py, standalone_graph.py, standalone.py and standalone_ranks.py
    inlined (no parity import at run time), each rank run under torchrun by torchrun_main, the
    `imports` (--import: the backend's plugins) imported first in every rank."""
    header = (
        "#!/usr/bin/env python3\n"
        f'"""{title}\n\n'
        f"Every rank for real, {dynamo_backend} compiling each rank's graph (exit 1 where an output fails):\n"
        f"    torchrun --standalone --nproc-per-node {world_size} repro.py\n"
        "Every rank simulated in one process (parity's replay):\n"
        f"    parity repro run {os.path.join(os.path.dirname(os.path.abspath(out)), 'world')}\n"
        'Needs torch and safetensors."""\n'
        + _culprit_hint(compiler_culprit)
        + "import json\nimport os\n\n"
        + _plugin_imports(imports)
        + f"DYNAMO_BACKEND = {json.dumps(dynamo_backend)}\n"
        + f"OPTIONS = json.loads({json.dumps(json.dumps(options or {}))})\n"
        + f"TOL = {float(tol)!r}\n\n")
    tail = ("\n\nif __name__ == \"__main__\":\n"
            "    import sys\n"
            "    sys.exit(torchrun_main(os.path.join(os.path.dirname(os.path.abspath(__file__)), \"world\"), DYNAMO_BACKEND, OPTIONS, TOL))\n")
    return _write(out, header + _inlined("same", "standalone_graph", "standalone", "standalone_ranks") + tail)


def _write(out: str, text: str) -> str:
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    # The request (runtime/tool_script.cpp): {"repro", "out", "dynamo_backend", "compiler_culprit",
    # "imports"}, or for a minimum across ranks {"world": {"options", "tol", "world_size", "title"},
    # "out", "dynamo_backend", "compiler_culprit", "imports"}.
    req = json.loads(sys.argv[1])
    if "world" in req:
        w = req["world"]
        write_world_script(req["out"], req["dynamo_backend"], w.get("options"), w["tol"], w["world_size"], w["title"],
                           req.get("imports") or (), req.get("compiler_culprit"))
    else:
        write_script(req["repro"], req.get("dynamo_backend") or None, req["out"], req.get("compiler_culprit"),
                     req.get("imports") or ())
