"""Every Python module parity ships is imported, and the Python code (tools/, bench/, scripts/,
tests/) passes pyflakes' checks, which honour no noqa, so none can hide one (a re-export is named
in __all__): an undefined name (the NameError that broke aot_inductor), an unused import
or variable fails here, not in a user's run. And no C++ source parity ships calls
std::filesystem::remove_all but util/files.h's RemoveAll: torch 2.11's CUDA libtorch.so exports
its own copy, which the dynamic linker binds parity's call to, and which jumps to null (a
segfault no CPU run shows). No C++ source includes ATen's umbrella headers (ATen/ATen.h,
ATen/Functions.h, torch/torch.h): each costs every translation unit that reaches it about 8 CPU-s
of parsing, three builds a CI run (cmake/TorchWheel.cmake, AT_PER_OPERATOR_HEADERS)."""
import importlib
import io
import os
import pkgutil

import pyflakes.api
import pyflakes.reporter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_parity_capture_module_imports():
    import parity_capture
    names = [m.name for m in pkgutil.walk_packages(parity_capture.__path__, "parity_capture.")]
    assert "parity_capture.backends.exported" in names and "parity_capture.profiling.kernel" in names, names
    for name in names:
        if name.endswith("__main__"):
            continue
        importlib.import_module(name)


def test_python_code_passes_pyflakes():
    paths = [os.path.join(ROOT, p) for p in ("tools", "bench", "scripts", "tests", "fuzz")]
    # pyflakes itself, in this process: flake8 --select=F ran the same checks in 5.4 CPU-s against
    # 0.7, most of it pycodestyle's, whose findings --select then dropped.
    out, err = io.StringIO(), io.StringIO()
    found = pyflakes.api.checkRecursive(paths, pyflakes.reporter.Reporter(out, err))
    assert found == 0 and not err.getvalue(), out.getvalue() + err.getvalue()


SHIPPED = ("util", "repro", "interpreter", "compare", "results", "runtime", "host_ops", "experiment", "matrix", "verify",
           "distributed", "minifier", "profile", "ci", "report", "cli")  # the rooms of what parity ships


def cpp_lines(tops):
    """(path, line number, line) of every C++ source and header under the top-level dirs `tops`."""
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".h")):
                    path = os.path.join(dirpath, f)
                    for i, line in enumerate(open(path, errors="replace"), 1):
                        yield path, i, line


def test_cpp_calls_std_filesystem_remove_all_only_through_remove_all():
    import re
    calls = re.compile(r"(?<![\w:])(?:fs|std::filesystem|filesystem)::remove_all\s*\(")
    found = [f"{path}:{i}" for path, i, line in cpp_lines(SHIPPED)
             if path != os.path.join(ROOT, "util", "files.cpp") and calls.search(line)]
    assert not found, found


def test_cpp_includes_no_umbrella_header_of_aten():
    import re
    umbrella = re.compile(r"#\s*include\s*<(ATen/ATen\.h|ATen/Functions\.h|torch/torch\.h|torch/all\.h|torch/extension\.h)>")
    found = [f"{path}:{i}" for path, i, line in cpp_lines(SHIPPED + ("tests", "fuzz", "bench", "cmake")) if umbrella.search(line)]
    assert not found, found
