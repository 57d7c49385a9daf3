"""bytecode.py: a parity_capture module run as -m would, after the packages its imports come from
were compiled into parity's bytecode cache, once, a process per core."""
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")
SCRIPT = os.path.join(TOOLS, "parity_capture", "bytecode.py")


def _python(code, prefix, tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{TOOLS}", PYTHONPYCACHEPREFIX=str(prefix))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tmp_path)


@pytest.fixture
def pkg(tmp_path):
    """A package of two modules, one in a tests/ dir (skipped: no parity process imports tests)."""
    (tmp_path / "smallpkg" / "tests").mkdir(parents=True)
    (tmp_path / "smallpkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "smallpkg" / "mod.py").write_text("Y = 2\n")
    (tmp_path / "smallpkg" / "tests" / "test_it.py").write_text("Z = 3\n")
    return tmp_path / "smallpkg"


ENSURE = """
import sys
sys.path.insert(0, sys.argv[2])
import bytecode
print(bytecode.ensure_compiled(int(sys.argv[1]), names=("smallpkg",)))
"""


def test_compiled_once_per_torch_into_the_prefix_and_only_on_enough_cores(tmp_path, pkg):
    prefix = tmp_path / "pycache"
    here = os.path.dirname(SCRIPT)
    tag = sys.implementation.cache_tag

    def compiled():
        return {f for _, _, files in os.walk(prefix) for f in files if f.endswith(".pyc")}
    few = _python(ENSURE, prefix, tmp_path, "2", here)
    assert few.stdout.strip() == "False", few.stderr  # two cores: the imports compile what they need
    assert f"mod.{tag}.pyc" not in compiled() and not (prefix / f"parity-compiled-{tag}").exists()
    first = _python(ENSURE, prefix, tmp_path, "4", here)
    assert first.stdout.strip() == "True", first.stderr
    assert {f"__init__.{tag}.pyc", f"mod.{tag}.pyc"} <= compiled() and f"test_it.{tag}.pyc" not in compiled()
    assert (prefix / f"parity-compiled-{tag}").read_text().startswith(os.path.dirname(__import__("torch").__file__))
    again = _python(ENSURE, prefix, tmp_path, "4", here)
    assert again.stdout.strip() == "False", again.stderr  # the marker names this torch: nothing to do


def test_a_cache_it_cannot_write_is_logged_and_nothing_else(tmp_path, pkg):
    (tmp_path / "a-file").write_text("")
    r = _python(ENSURE, tmp_path / "a-file" / "pycache", tmp_path, "4", os.path.dirname(SCRIPT))
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    assert "compiling the bytecode cache failed" in r.stderr


def test_the_module_runs_as_dash_m_would(tmp_path):
    (tmp_path / "shown.py").write_text(
        "import os, sys\nprint(__name__, sys.argv[1:], sys.path[0] == os.getcwd(), os.path.basename(sys.argv[0]))\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{TOOLS}")
    env.pop("PYTHONPYCACHEPREFIX", None)  # no cache of parity's: nothing compiled before the run
    (tmp_path / "linked").symlink_to(os.path.realpath(TOOLS))  # a tools dir reached through a link
    for script in (SCRIPT, str(tmp_path / "linked" / "parity_capture" / "bytecode.py")):
        p = subprocess.run([sys.executable, script, "shown", "--flag", "v"], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == ["__main__", "['--flag',", "'v']", "True", "shown.py"], script
