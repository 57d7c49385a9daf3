"""ending.py: how parity's own Python processes end once their work is written."""
import os
import subprocess
import sys

PROGRAM = """
import atexit, sys
atexit.register(lambda: open(sys.argv[1], "w").write("handlers ran"))
sys.stdout.write("buffered, no newline")
from parity_capture.ending import end
end(None if sys.argv[2] == "none" else int(sys.argv[2]))
raise AssertionError("end returned")
"""


def _run(tmp_path, code):
    marker = tmp_path / f"handler-{code}"
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    p = subprocess.run([sys.executable, "-c", PROGRAM, str(marker), code], capture_output=True, text=True, env=env)
    return p, marker


def test_the_status_the_exit_handlers_and_what_was_written_survive_the_skipped_teardown(tmp_path):
    p, marker = _run(tmp_path, "3")
    assert p.returncode == 3, p.stderr
    assert p.stdout == "buffered, no newline"  # flushed before the process ended
    assert marker.read_text() == "handlers ran"  # atexit ran, as sys.exit's would
    p, marker = _run(tmp_path, "none")
    assert p.returncode == 0 and marker.exists(), p.stderr  # None ends with 0, as sys.exit(None)
