"""Every Python module parity ships is imported, and the Python code (tools/, bench/, scripts/,
tests/) passes pyflakes' checks through flake8 --select=F, with no noqa to hide one (a re-export
is named in __all__): an undefined name (the NameError that broke aot_inductor), an unused import
or variable fails here, not in a user's run."""
import importlib
import os
import pkgutil
import subprocess
import sys

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
    r = subprocess.run([sys.executable, "-m", "flake8", "--select=F", "--disable-noqa", *paths], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
