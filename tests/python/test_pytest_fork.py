"""pytest_fork.py, the server the Python entries' pytest runs are forked from (tests/CMakeLists.txt):
a forked run is the run `python -m pytest` would be (its output, exit status or signal, working
dir, signal dispositions); a client whose environment is not the server's, or that finds no server, runs pytest itself;
a client killed mid-run ends its run; --stop ends the server once its runs end. The server here
imports nothing (PARITY_TEST_PYTEST_PRELOAD empty): what is forked is the same either way."""
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FORK = os.path.join(HERE, "pytest_fork.py")

FILES = {
    "test_ok.py": "import os, signal, sys\n"
                  "def test_where():\n"
                  "    sig = [signal.getsignal(s) for s in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)]\n"
                  "    print('cwd', os.getcwd(), 'path0', sys.path[0], 'signals', sig, 'pid', os.getpid())\n",
    "test_fails.py": "def test_no():\n    assert 1 == 2\n",
    "test_crash.py": "import os, signal\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGABRT)\n",
    "test_sleeps.py": "import os, subprocess, time\n"
                      "def test_sleeps():\n"
                      "    p = subprocess.Popen(['sleep', '300'])\n"
                      "    open(os.environ['MARK'], 'w').write(str(p.pid))\n"
                      "    time.sleep(300)\n",
}


@pytest.fixture
def server(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    sock = str(tmp_path / "s.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"PARITY_TEST_PYTEST_SERVER": sock, "PARITY_TEST_PYTEST_PRELOAD": "", "MARK": str(tmp_path / "mark")})
    r = subprocess.run([sys.executable, FORK, "--start", sock], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "ready" in r.stdout, r.stdout + r.stderr
    yield tmp_path, env
    subprocess.run([sys.executable, FORK, "--stop", sock], env=env, timeout=60)


def client(tmp_path, env, *args, **kw):
    return subprocess.run([sys.executable, FORK, "-q", "-p", "no:cacheprovider", "-s", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, **kw)


def test_a_forked_run_is_the_run_python_m_pytest_makes(server):
    tmp_path, env = server
    r = client(tmp_path, env, "test_ok.py")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert f"cwd {tmp_path} path0 {tmp_path} " in r.stdout, r.stdout
    forked_pid = int(r.stdout.split(" pid ")[1].split()[0])
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "test_ok.py"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert plain.stdout.split(" pid ")[0] == r.stdout.split(" pid ")[0]
    assert "pytest started here" not in r.stderr  # forked: not a process of the client's
    assert forked_pid != os.getpid()
    r = client(tmp_path, env, "test_fails.py")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    r = client(tmp_path, env, "test_crash.py")
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stderr)


def test_a_client_whose_environment_differs_or_that_finds_no_server_runs_pytest_itself(server):
    tmp_path, env = server
    r = client(tmp_path, {**env, "TORCHINDUCTOR_VEC_ISA_OK": "1"}, "test_ok.py")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert "pytest started here: the environment's TORCHINDUCTOR_VEC_ISA_OK is not the server's" in r.stderr, r.stderr
    r = client(tmp_path, {**env, "PARITY_TEST_PYTEST_SERVER": str(tmp_path / "none.sock")}, "test_fails.py")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr


def test_a_client_killed_mid_run_ends_its_run_and_stop_waits_for_the_runs(server):
    tmp_path, env = server
    p = subprocess.Popen([sys.executable, FORK, "-q", "-p", "no:cacheprovider", "test_sleeps.py"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (tmp_path / "mark").exists() or not (tmp_path / "mark").read_text():
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    sleeper = int((tmp_path / "mark").read_text())
    p.kill()  # as ctest's timeout does
    p.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{sleeper}") and open(f"/proc/{sleeper}/stat").read().split(")")[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the run's process group outlived its client"
        time.sleep(0.05)
    r = subprocess.run([sys.executable, FORK, "--stop", env["PARITY_TEST_PYTEST_SERVER"]], env=env, timeout=60)
    assert r.returncode == 0 and not os.path.exists(env["PARITY_TEST_PYTEST_SERVER"])
