"""`parity import`: PyTorch's own repro scripts, written by PyTorch's own writer
(torch._dynamo.repro.after_aot.save_graph_repro, what TORCHDYNAMO_REPRO_AFTER="aot" and Inductor's
fx_graph_runnable artifact call), become repro dirs that verify and minify."""
import json
import os

import pytest
import torch
from safetensors.torch import load_file

from conftest import run_parity


def f(x, w):
    return (torch.relu(x @ w) * 2).sum(1), torch.tanh(x)


ARGS = [torch.randn(8, 16, generator=torch.Generator().manual_seed(0)),
        torch.randn(16, 4, generator=torch.Generator().manual_seed(1))]


def write_script(path, save_dir, command="run"):
    """A script as after_aot writes it (repro.py with its inputs stored under save_dir,
    minifier_launcher.py with command="minify") or as Inductor's trace writes fx_graph_runnable.py
    (save_dir None: random inputs); its __main__ block, which parity never runs, leaves a marker."""
    from torch._dynamo.repro.after_aot import save_graph_repro
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(f)(*ARGS)
    with open(path, "w") as fd:
        save_graph_repro(fd, gm, ARGS, "inductor_accuracy" if save_dir else "inductor", save_dir=save_dir and str(save_dir),
                         command=command)
        fd.write(f"\nif __name__ == '__main__':\n    open({str(path) + '.ran'!r}, 'w').close()\n")
    return str(path)


def imported(parity_bin, script, out, *args):
    r = run_parity(parity_bin, "import", script, "--out", str(out), *args)
    assert r.returncode == 0 and r.stdout == f"{out}\n", r.stdout + r.stderr  # the dir named on stdout
    return json.load(open(os.path.join(out, "manifest.json")))


def test_an_after_aot_repro_verifies_and_minifies_with_its_stored_inputs(parity_bin, tmp_path):
    script = write_script(tmp_path / "repro.py", tmp_path / "checkpoints")
    m = imported(parity_bin, script, tmp_path / "dir")
    assert not os.path.exists(script + ".ran")  # the module ran, its __main__ block did not
    assert m["backend"]["name"] == "inductor"
    facts = m["imported_from"]
    assert facts["command"] == "run" and facts["generated_storages"] == 0 and facts["script"] == script, facts
    # The dir holds the very values the script stored.
    stored = load_file(str(tmp_path / "dir" / m["tensors"]))
    assert any(torch.equal(t, ARGS[0]) for t in stored.values()) and any(torch.equal(t, ARGS[1]) for t in stored.values())
    r = run_parity(parity_bin, "verify", str(tmp_path / "dir"), "--backend", "inductor", "--output-dir", str(tmp_path / "v"))
    assert r.returncode == 0, r.stdout + r.stderr
    # The dir names its backend: minify needs no --backend; Inductor's relu knob reduces to the relu.
    r = run_parity(parity_bin, "minify", str(tmp_path / "dir"), "--backend-option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy",
                   "-j", "2", "--no-compiler-bisect", "--no-stage-bisect", "--out", str(tmp_path / "m"))
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.load(open(tmp_path / "m" / "summary.json"))
    assert s["culprit"]["target"] == "aten::relu", s["graph_text"]


def test_fx_graph_runnable_and_minifier_launcher_import_with_the_inputs_they_name(parity_bin, tmp_path):
    runnable = write_script(tmp_path / "fx_graph_runnable.py", None)
    m = imported(parity_bin, runnable, tmp_path / "runnable", "--name", "my_graph")
    assert m["model"] == "my_graph" and m["imported_from"]["generated_storages"] == 2, m  # random, as PyTorch's reader
    r = run_parity(parity_bin, "verify", str(tmp_path / "runnable"), "--backend", "eager", "--output-dir", str(tmp_path / "v"))
    assert r.returncode == 0, r.stdout + r.stderr
    launcher = write_script(tmp_path / "minifier_launcher.py", tmp_path / "ckpt", command="minify")
    # A custom pass in the config the failing compile ran with: after_aot writes the object's repr,
    # which is not Python (pytorch/pytorch#128830); the import drops that line and says so.
    text = open(launcher).read()
    cut = text.index("\n") + 1
    open(launcher, "w").write(text[:cut] + "import torch._inductor.config\ntorch._inductor.config.post_grad_custom_post_pass"
                              " = <function post_grad_custom_post_pass at 0x7fc837dba680>\n" + text[cut:])
    r = run_parity(parity_bin, "import", launcher, "--out", str(tmp_path / "launcher"))
    assert r.returncode == 0 and "post_grad_custom_post_pass is set to an object's repr" in r.stderr, r.stdout + r.stderr
    m = json.load(open(tmp_path / "launcher" / "manifest.json"))
    assert m["imported_from"]["command"] == "minify" and m["imported_from"]["generated_storages"] == 0
    assert m["imported_from"]["dropped_settings"] == ["torch._inductor.config.post_grad_custom_post_pass"], m


@pytest.mark.parametrize("forked", [True, False])
def test_the_script_runs_in_a_fork_of_the_kept_workers_server_or_a_fresh_interpreter(parity_bin, tmp_path, monkeypatch, forked):
    """While parity keeps workers, the script's process is forked from the pool's fork server
    (runtime/python_run.h: torch, dynamo and Inductor already imported), its supervisor between
    them; with PARITY_FORK_SERVER=0 it is parity's own child, a fresh interpreter."""
    import subprocess
    if not os.environ.get("PARITY_KEEP_WORKERS"):  # by hand: a pool of this test's own
        monkeypatch.setenv("PARITY_WORKER_POOL", str(tmp_path / "pool"))
        monkeypatch.setenv("PARITY_KEEP_WORKERS", "5")
    if forked:
        monkeypatch.delenv("PARITY_FORK_SERVER", raising=False)  # forking on, whatever the caller set
    else:
        monkeypatch.setenv("PARITY_FORK_SERVER", "0")
    script = write_script(tmp_path / "repro.py", tmp_path / "checkpoints")
    chain = str(tmp_path / "chain")
    with open(script, "a") as fd:  # the module's top level runs in the import's process
        fd.write(f"import os as _os\nwith open({chain!r}, 'w') as _f:\n"
                 f"    _f.write(str(_os.getppid()) + ' ' + open(f'/proc/{{_os.getppid()}}/stat').read().rsplit(')', 1)[1].split()[1])\n")
    p = subprocess.Popen([parity_bin, "import", script, "--out", str(tmp_path / "dir")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0 and out == f"{tmp_path / 'dir'}\n", out + err
    parent, grandparent = map(int, open(chain).read().split())
    servers = [int(line.split()[2]) for line in run_parity(parity_bin, "workers").stdout.splitlines() if line.endswith("fork server")]
    if forked:
        assert parent != p.pid and grandparent in servers, (parent, grandparent, servers, p.pid)
    else:
        assert parent == p.pid, (parent, p.pid)
    assert json.load(open(tmp_path / "dir" / "manifest.json"))["imported_from"]["generated_storages"] == 0


@pytest.mark.parametrize("text,needle", [("print('hello')\n", "defines no `class Repro`"),
                                         ("class Repro: pass\ndef load_args(r): raise ValueError('broken')\n", "broken")])
def test_a_script_that_is_not_such_a_repro_is_exit_2_naming_it(parity_bin, tmp_path, text, needle):
    script = tmp_path / "not_a_repro.py"
    script.write_text(text)
    r = run_parity(parity_bin, "import", str(script), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and str(script) in r.stderr and needle in r.stderr, r.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_repro_whose_graph_only_writes_its_inputs_verifies_what_it_writes(parity_bin, tmp_path):
    """The shape pytorch/pytorch#177122 pastes: an optimizer step's after_aot graph, a foreach add
    over the parameters copied back into them (it returns nothing), under the user's own seed
    lines. The written values are its outputs; the dir's inputs are the values the script stored."""
    from torch._dynamo.repro.after_aot import save_graph_repro
    from torch.func import functionalize as func_functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(*params):
        torch._foreach_add_(list(params), 1)

    params = [torch.randn(4 * (k + 1), generator=torch.Generator().manual_seed(k)) for k in range(6)]
    gm = make_fx(func_functionalize(step, remove="mutations_and_views"))(*[p.clone() for p in params])
    assert "copy_" in gm.code and "_foreach_add.Scalar" in gm.code, gm.code
    script = tmp_path / "repro.py"
    with open(script, "w") as fd:
        fd.write("import torch\nSEED=100\ntorch.manual_seed(SEED)\ntorch.backends.cudnn.deterministic = True\n")
        save_graph_repro(fd, gm, params, "inductor_accuracy", save_dir=str(tmp_path / "checkpoints"))
    m = imported(parity_bin, str(script), tmp_path / "dir")
    (g,) = m["graphs"]
    assert len(g["output_names"]) == 6 and all(n.startswith("mutated/") for n in g["output_names"]), g["output_names"]
    stored = load_file(str(tmp_path / "dir" / m["tensors"]))
    assert all(any(torch.equal(t, p) for t in stored.values()) for p in params)  # the values before the step
    assert all(any(torch.equal(t, p + 1) for t in stored.values()) for p in params)  # and after it, expected
    r = run_parity(parity_bin, "verify", str(tmp_path / "dir"), "--backend", "inductor", "--output-dir", str(tmp_path / "v"))
    assert r.returncode == 0, r.stdout + r.stderr
    # A wrong foreach kernel (each tensor of its list perturbed) fails on the written values.
    r = run_parity(parity_bin, "verify", str(tmp_path / "dir"), "--backend", "fault", "--backend-option", "op=aten::_foreach_add",
                   "--output-dir", str(tmp_path / "f"))
    assert r.returncode == 1 and "FAIL" in r.stdout, r.stdout + r.stderr
