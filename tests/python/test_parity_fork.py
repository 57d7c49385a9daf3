"""parity_fork.py: the tests' parity runs forked by a zygote server of the binary's own
(util/zygote.h ServeZygote), each the run an exec would have been; refused (the caller execs)
where the environment differs in what the binary read as it loaded; a timeout ends the run."""
import os
import subprocess
import time

import pytest

import parity_fork


@pytest.fixture
def server(parity_bin, tmp_path, monkeypatch):
    """A server of this test's own (not the suite's), its path in the environment run() reads."""
    path = str(tmp_path / "z.sock")
    said = parity_fork.start(path, parity_bin)
    assert os.path.exists(path), said
    monkeypatch.setenv(parity_fork.SERVER_ENV, path)
    yield path
    parity_fork.stop(path)
    assert not os.path.exists(path)  # ended, its socket removed


def both(parity_bin, *args, **kw):
    """The forked run and the exec'd one of `parity ARGS`."""
    argv = [parity_bin, *map(str, args)]
    forked = parity_fork.run(argv, **kw)
    assert forked is not None, "the server did not fork it"
    return forked, subprocess.run(argv, capture_output=True, text=True, **kw)


def test_a_forked_run_is_what_the_exec_would_have_been(server, parity_bin, test_data, tmp_path):
    for args in (["--version"],
                 ["repro", "show", os.path.join(test_data, "models", "mlp")],
                 ["verify", str(tmp_path / "no-such-dir")],  # exit 2, said on stderr
                 ["no-such-command"]):
        forked, execd = both(parity_bin, *args)
        assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr), args
    # The caller's working dir and environment (here a variable parity reads per command).
    out = tmp_path / "here"
    out.mkdir()
    forked = parity_fork.run([parity_bin, "verify", "--model", "mlp", "--backend", "eager", "--output-dir", "v"], cwd=str(out),
                             env=dict(os.environ, PARITY_KEEP_WORKERS="0"))
    assert forked.returncode == 0, forked.stdout + forked.stderr
    assert (out / "v" / "results.jsonl").exists()


def test_an_environment_differing_in_what_the_binary_read_as_it_loaded_is_refused(server, parity_bin):
    assert parity_fork.run([parity_bin, "--version"], env=dict(os.environ, LD_BIND_NOW="1")) is None
    assert parity_fork.run([parity_bin, "--version"], env=dict(os.environ, TORCH_SHOW_CPP_STACKTRACES="1")) is None
    assert parity_fork.run([parity_bin, "--version"], env=dict(os.environ, PARITY_ANYTHING="1")) is not None


def test_a_timeout_kills_the_run_as_subprocess_run_does(server, parity_bin, test_data):
    argv = [parity_bin, "repro", "run", os.path.join(test_data, "models", "mlp"), "--backend", "fault",
            "--backend-option", "op=aten::gelu", "--backend-option", "kind=hang"]
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        parity_fork.run(argv, timeout=2)
    assert time.monotonic() - t0 < 20
    # The server answered the kill: the next run is served at once.
    assert parity_fork.run([parity_bin, "--version"]).returncode == 0


def test_without_a_server_the_caller_runs_the_binary_itself(parity_bin, tmp_path, monkeypatch):
    monkeypatch.setenv(parity_fork.SERVER_ENV, str(tmp_path / "none.sock"))
    assert parity_fork.run([parity_bin, "--version"]) is None
    monkeypatch.delenv(parity_fork.SERVER_ENV)
    assert parity_fork.run([parity_bin, "--version"]) is None
