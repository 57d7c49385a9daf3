"""Distributed programs (docs/distributed.md), 2 and 4 ranks of a gloo group on the CPU: each rank's
graphs captured by dump_backend into one multi-rank dir, replayed by `parity repro run` in one
process with the collectives computed from every rank's values (simulated), against what each
rank's program computed with gloo; a rank that never joins a collective is named with the op; a
multi-rank dir whose ranks disagree is exit 2 naming the file and field. (Minify of a multi-rank
dir: test_distributed_minify.py.)"""
import json
import os
import subprocess
import sys

import pytest

from conftest import run_parity, verify

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_programs import capture  # noqa: E402
from relu_model import RELU_KNOB  # noqa: E402


# Every 2-rank program in one run of the ranks (one start-up of torch and of the group).
KINDS_2 = "collectives,ddp,ddp_python_reducer,fsdp2,fsdp2_whole,tp,sp,tp_sp,tp_sp_breaks"


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    base = tmp_path_factory.mktemp("two")
    capture(KINDS_2, 2, base)
    return base


@pytest.fixture(scope="module")
def collectives2(two_ranks):
    return two_ranks / "collectives"


def replay(parity_bin, d, *args):
    r = run_parity(parity_bin, "repro", "run", str(d), "--json", *args)
    return r, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else None)


@pytest.mark.parametrize("world", [2, 4])
def test_functional_collectives_replay_on_one_machine_as_gloo_computed_them(parity_bin, collectives2, tmp_path, world):
    d = collectives2 if world == 2 else tmp_path / "collectives"
    if world == 4:
        capture("collectives", 4, tmp_path)
    top = json.load(open(d / "manifest.json"))
    assert top == {"format": "parity.distributed", "version": 1, "world_size": world,
                   "ranks": [f"rank{r}" for r in range(world)]}, top
    for r in range(world):
        m = json.load(open(d / f"rank{r}" / "manifest.json"))
        assert m["distributed"] == {"rank": r, "world_size": world, "process_groups": {"0": list(range(world))}}, m
        assert "host_ops" not in m  # collectives are ops parity knows
    r, report = replay(parity_bin, d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["pass"] and report["world_size"] == world and report["replay"] == "simulated"
    for rank in report["ranks"]:
        (g,) = rank["graphs"]
        assert g["pass"] and g["fp64_reference"], rank  # the fp64 reference runs the collectives too
        assert len(g["outputs"]) == 3 and all(o["pass"] for o in g["outputs"])


# What each kind records: (at least this many graphs per rank, mode, whether they call collectives).
KINDS = {"ddp": (2, "train", False),      # split at the buckets; the allreduce is in DDP's C++ reducer
         # compiled autograd: the forward, then the backward graphs, the reducer's all_reduce inside
         "ddp_python_reducer": (3, "train", True),
         "fsdp2": (2, "train", False),    # each block's graph, its all-gathers in FSDP's hooks
         "fsdp2_whole": (2, "train", False),  # the root sharded, the whole model compiled: a graph per block
         # DTensor desugared: local shards in, the row-wise all_reduce inside; its backward a graph of its own
         "tp": (2, "train", True),
         # autograd collectives in the forward; its backward (their backward collectives) a graph of its own
         "sp": (2, "train", True),
         # torchtitan's TP+SP block: one graph, its backward a graph of its own
         "tp_sp": (2, "train", True),
         # the same with the column-wise layers' default input layout: DTensor's reshapes break it
         # into nine graphs, some symbolic (a recompile at another width), some making a DTensor
         # of a plain tensor; each trained
         "tp_sp_breaks": (9, "train", True)}


# The weights whose gradients graph_0's backward graph returns, per kind that records one.
BACKWARD_WEIGHTS = {"tp": ("up", "down"), "sp": ("up", "down"), "tp_sp": ("wq", "wo", "w1", "w2", "attention_norm")}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_program_kind_replays_simulated_and_for_real(parity_bin, two_ranks, kind):
    """Captured and replayed simulated; a kind whose graphs call collectives also for real, with
    aot_eager (Inductor's compile of every rank is the collectives test's: its C++ kernels cost
    the suite most of a minute per kind)."""
    d = two_ranks / kind
    graphs, mode, collectives = KINDS[kind]
    for r in range(2):
        m = json.load(open(d / f"rank{r}" / "manifest.json"))
        assert len(m["graphs"]) >= graphs and m["mode"] == mode and not m.get("skipped_graphs"), m
        assert bool(m["distributed"]["process_groups"]) == collectives, m
    r, report = replay(parity_bin, d)
    assert r.returncode == 0 and report["pass"], r.stdout + r.stderr
    m1, gathered = m, {"_c10d_functional::reduce_scatter_tensor", "_c10d_functional::all_gather_into_tensor"}

    def ops(entry):
        return {n.get("target") for n in json.load(open(d / "rank1" / entry["file"]))["nodes"]}
    # The backward's graph: each parameter's gradient (its shard's, for TP) an output; SP's and
    # TP+SP's with the collectives' backward (the all_gather's reduce_scatter and the other way).
    if kind in BACKWARD_WEIGHTS:
        (bwd,) = [g for g in m1["graphs"] if g.get("backward_of") == "graph_0"]
        assert {f"grad/param/{w}.weight" for w in BACKWARD_WEIGHTS[kind]} <= set(bwd["output_names"]), bwd
        if kind in ("sp", "tp_sp"):
            assert gathered <= ops(bwd), ops(bwd)
    if kind == "tp_sp_breaks":
        # Every graph trained, and those taking DTensors have their backward recorded: the
        # gradient fed to a sharded output as the program's replicated or partial one, moved to
        # the output's placement as AOTAutograd moves it; an output no gradient reached, zeros.
        forward = [g for g in m1["graphs"] if not g.get("backward_of")]
        assert len(forward) == 9 and all(g["mode"] == "train" for g in forward), m1["graphs"]
        assert len([g for g in m1["graphs"] if g.get("backward_of")]) >= 5, m1["graphs"]
        # The recompiles at another width are symbolic graphs of a DTensor: its local tensor, and
        # its symbolic sizes and strides, taken and returned as AOTAutograd desugars them.
        symbolic = [g for g in forward if "symbols" in json.load(open(d / "rank1" / g["file"]))]
        assert len(symbolic) >= 2, [g["name"] for g in forward]
    if collectives and kind != "tp_sp_breaks":  # (its collectives are tp_sp's, replayed for real there)
        r, report = replay(parity_bin, d, "--backend", "aot_eager")
        assert r.returncode == 0 and report["pass"] and report["replay"] == "real", r.stdout + r.stderr


def edit(path, change):
    j = json.load(open(path))
    change(j)
    json.dump(j, open(path, "w"))


def test_a_rank_that_never_joins_a_collective_is_named_with_the_op(parity_bin, collectives2, tmp_path):
    d = tmp_path / "dir"
    subprocess.run(["cp", "-r", str(collectives2), str(d)], check=True)

    def no_last_collective(g):  # rank 1 keeps its own values: one collective fewer than rank 0
        n = [n for n in g["nodes"] if n.get("target") == "_dtensor::shard_dim_alltoall"][-1]
        n["target"], n["args"] = "aten::clone", n["args"][:1]
    edit(d / "rank1" / "graphs" / "graph_0.json", no_last_collective)
    r, report = replay(parity_bin, d, "--no-fp64")
    assert r.returncode == 1 and not report["pass"], r.stdout + r.stderr
    errors = [g["error"] for rank in report["ranks"] for g in rank["graphs"] if g.get("error")]
    assert any("rank 1 ended its run without joining it" in e and "_dtensor::shard_dim_alltoall" in e for e in errors), errors
    # The ranks reducing with different ops is named too.
    d2 = tmp_path / "dir2"
    subprocess.run(["cp", "-r", str(collectives2), str(d2)], check=True)

    def max_not_sum(g):
        n = next(n for n in g["nodes"] if n.get("target") == "_c10d_functional::all_reduce")
        n["args"][1] = "max"
    edit(d2 / "rank1" / "graphs" / "graph_0.json", max_not_sum)
    r, report = replay(parity_bin, d2, "--no-fp64")
    assert r.returncode == 1 and "disagree on argument \\\"reduce_op\\\"" in r.stdout, r.stdout + r.stderr


def test_a_multi_rank_dir_whose_ranks_disagree_is_exit_2(parity_bin, collectives2, tmp_path):
    d = tmp_path / "dir"
    subprocess.run(["cp", "-r", str(collectives2), str(d)], check=True)
    edit(d / "rank1" / "manifest.json", lambda m: m["distributed"].update(world_size=3))
    r = run_parity(parity_bin, "repro", "run", str(d))
    assert r.returncode == 2 and 'rank1/manifest.json: field "distributed.world_size" is not 2' in r.stderr, r.stderr
    edit(d / "rank1" / "manifest.json", lambda m: m["distributed"].update(world_size=2, process_groups={"0": [1, 0]}))
    r = run_parity(parity_bin, "repro", "run", str(d))
    assert r.returncode == 2 and 'process_groups.0" is [1,0], but' in r.stderr, r.stderr
    # minify reads the world as repro run does: the same error.
    r = run_parity(parity_bin, "minify", str(d), "--backend", "inductor")
    assert r.returncode == 2 and 'process_groups.0" is [1,0], but' in r.stderr, r.stderr
    # No rank fails isolated (eager computes what the replay fed in), nor do the ranks together:
    # minify tries each rank, then every rank for real, and says there is nothing to minify (exit 1).
    r = run_parity(parity_bin, "minify", str(collectives2), "--backend", "eager", "--out", str(tmp_path / "m"))
    assert r.returncode == 1 and "no rank of" in r.stderr and "2 ranks tried" in r.stderr, r.stdout + r.stderr
    assert "does not fail with eager on its ranks together either" in r.stderr, r.stderr
    # Each rank's log line says why (its isolated run's verdict).
    assert all(f"rank {k}: does not fail isolated: the original does not fail with backend eager (3 runs; first: PASS" in r.stdout
               for k in (0, 1)), r.stdout


def test_inductor_runs_every_rank_for_real_and_its_relu_bug_fails_every_rank(parity_bin, collectives2, tmp_path):
    """--backend: a process per rank over gloo runs the rank's graph compiled by Inductor (the
    compiled collectives for real), judged against the rank's stored outputs with the simulated
    fp64 reference."""
    r, report = replay(parity_bin, collectives2, "--backend", "inductor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["pass"] and report["replay"] == "real" and report["backend"] == "inductor"
    assert all(rank["graphs"][0]["pass"] and rank["graphs"][0]["fp64_reference"] for rank in report["ranks"]), report
    # `parity verify` runs the ranks the same way and writes a record per rank.
    r, recs = verify(parity_bin, tmp_path / "v", collectives2, *RELU_KNOB)
    assert r.returncode == 1, r.stdout + r.stderr
    assert [(x["distributed"], x["verification_code"]) for x in recs] == \
        [({"rank": k, "world_size": 2, "replay": "real"}, "FAIL") for k in range(2)], recs
    assert "FAIL (2 ranks, real replay" in r.stdout, r.stdout
    # `parity ci --minify` over those records: the multi-rank dir minified once, with the records'
    # backend and knob (minifier/ranks.h), both ranks' rows naming the relu.
    exp = tmp_path / "expected"
    exp.mkdir()
    (exp / f"{recs[0]['experiment']['config']}.csv").write_text(
        "name,accuracy,graph_breaks\n" + "".join(f"{x['model']['model_name']},pass,0\n" for x in recs))
    r = run_parity(parity_bin, "ci", "--expected", str(exp), "--results", str(tmp_path / "v" / "results.jsonl"),
                   "--output-dir", str(tmp_path / "ci"), "--minify")
    assert r.returncode == 1 and "culprit: aten::relu" in r.stdout, r.stdout + r.stderr
    rows = json.load(open(tmp_path / "ci" / "gate.json"))["rows"]
    assert [(row["verdict"], row["culprit"]["op"]) for row in rows] == [("FAIL", "aten::relu")] * 2, rows
    summary = json.load(open(os.path.join(os.path.dirname(os.path.dirname(rows[0]["minified_dir"])), "summary.json")))
    assert summary["world"]["rank"] == 0 and "_c10d_functional" not in summary["graph_text"], summary
    # A backend with no torch.compile form cannot run the ranks for real: exit 2 naming it.
    r = run_parity(parity_bin, "repro", "run", str(collectives2), "--backend", "fault")
    assert r.returncode == 2 and "no torch.compile backend" in r.stderr, r.stderr


def test_a_compile_that_raises_on_one_rank_ends_the_try_on_every_rank_before_any_collective():
    """The compiler bisection in step (rank_replay.try_in_step), driven with fakes for the ranks'
    agreement: every rank compiles, then all run only where all compiled. A rank whose compile
    raised says so in the first agreement, so no rank runs the graph's collectives (where the
    others would wait for the group's timeout); the try counts as good, as a raise does."""
    from parity_capture.rank_replay import try_in_step
    told, ran = [], []

    def judge(runs):
        ran.append(runs)
        return False

    def raises():
        raise RuntimeError("this stage refuses the graph")

    def agree_with(others_ok):
        return lambda ok: told.append(ok) or (ok and others_ok)

    ended = []

    def runs_ended(raised, seconds):
        ended.append(type(raised).__name__ if raised is not None else None)

    assert try_in_step(raises, judge, agree_with(True), runs_ended) is True and told == [False] and not ran and not ended
    told.clear()
    assert try_in_step(lambda: ["compiled"], judge, agree_with(False), runs_ended) is True and told == [True] and not ran  # another rank's raised
    assert not ended  # nothing ran
    assert try_in_step(lambda: ["compiled"], judge, agree_with(True), runs_ended) is False and ran == [["compiled"]]  # run, judged
    assert try_in_step(lambda: ["compiled"], lambda runs: raises(), agree_with(True), runs_ended) is True
    assert ended == [None, "RuntimeError"]  # each run's end told, the raise with it


def test_a_run_that_raised_waits_for_the_others_runs_or_names_the_rank_left_in_a_collective():
    """rank_replay.RunsEnded with a store of its own: a rank whose run ran through says so and goes
    on; one whose run raised goes on once every rank's run has ended (raised or not), and ends the
    bisection (WorldStuck, naming the rank still running) when one has not within its grace."""
    from parity_capture.rank_replay import RunsEnded, WorldStuck

    class Store:
        def __init__(self):
            self.keys = {}

        def set(self, key, value):
            self.keys[key] = value

        def check(self, keys):
            return all(k in self.keys for k in keys)

    store = Store()
    rank0, rank1 = RunsEnded(store, 0, 2, timeout_s=60, poll_s=0.01), RunsEnded(store, 1, 2, timeout_s=60, poll_s=0.01)
    assert rank0.grace(1.0) == 12.0 and rank0.grace(100.0) == 60.0  # never past the group's timeout
    rank1(None, 0.1)  # try 1: rank 1 ran through, rank 0 raised: every run ended
    rank0(RuntimeError("no kernel"), 0.1)
    assert store.keys == {"parity/run1/1": "ran", "parity/run1/0": "raised"}
    rank0.grace = lambda seconds: 0.2  # try 2: rank 1 never says (it waits in a collective)
    with pytest.raises(WorldStuck, match=r"try 2 .*RuntimeError: no kernel; rank 1 still ran"):
        rank0(RuntimeError("no kernel"), 0.1)


def test_a_rank_of_a_standalone_repro_makes_every_rank_s_groups():
    """standalone_ranks.world_groups: torch's new_group is called by every rank for every group, so
    each rank of a minimum's repro.py makes the groups of all ranks (a 2-D mesh: rank 0 records only
    its own tensor-parallel group, rank 2 another), not only those its manifest records."""
    import tempfile
    from parity_capture.standalone_ranks import rank_dirs, world_groups
    with tempfile.TemporaryDirectory() as d:
        groups = [{"0": [0, 1, 2, 3], "3": [0, 1]}, {"0": [0, 1, 2, 3], "3": [0, 1]}, {"0": [0, 1, 2, 3], "4": [2, 3]},
                  {"0": [0, 1, 2, 3], "4": [2, 3]}]
        for r, g in enumerate(groups):
            os.makedirs(os.path.join(d, f"rank{r}"))
            with open(os.path.join(d, f"rank{r}", "manifest.json"), "w") as f:
                json.dump({"distributed": {"rank": r, "world_size": 4, "process_groups": g}}, f)
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump({"format": "parity.distributed", "version": 1, "world_size": 4, "ranks": [f"rank{r}" for r in range(4)]}, f)
        assert [os.path.basename(p) for p in rank_dirs(d)] == ["rank0", "rank1", "rank2", "rank3"]
        assert world_groups(d) == {"0": [0, 1, 2, 3], "3": [0, 1], "4": [2, 3]}


RAISES_ON_RANK0 = '''
import datetime, os, sys, time
import torch, torch.distributed as dist
from parity_capture.rank_replay import RunsEnded, WorldStuck, try_in_step
rank, store_path, where = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=60))

def agree(ok):
    flag = torch.tensor([int(ok)])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())

def judge(_):  # a graph's run: one collective; rank 0 raises before it or after it
    if rank == 0 and where == "before":
        raise RuntimeError("the kernel raised")
    x = torch.ones(2)
    dist.all_reduce(x)
    if rank == 0 and where == "after":
        raise RuntimeError("the kernel raised")
    return False

ended = RunsEnded(dist.distributed_c10d._get_default_store(), rank, 2, timeout_s=60)
ended.grace = lambda seconds: 3.0
started = time.monotonic()
try:
    good = agree(try_in_step(lambda: "compiled", judge, agree, ended))
except WorldStuck as e:
    print(f"rank {rank}: stuck after {time.monotonic() - started:.1f} s: {e}", flush=True)
    os._exit(1)
print(f"rank {rank}: try good={good}, next agreement {agree(True)}", flush=True)
dist.barrier()  # as rank_replay leaves: gloo's teardown under a peer's collective can abort a process
dist.destroy_process_group()
'''


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_run_that_raises_on_one_rank_ends_the_world_at_once_or_goes_on_where_the_others_finished(tmp_path, where):
    """Two gloo ranks run a try of the bisection in step (rank_replay.try_in_step with RunsEnded);
    rank 0's run raises. Before the graph's collective, rank 1 waits in it: rank 0 ends within its
    grace (3 s here, not the group's 60 s), naming rank 1, and parity's replay would end rank 1 with
    it. After it, rank 1's run ends too: both go on to the try's agreement and the next, paired."""
    script = tmp_path / "ranks.py"
    script.write_text(RAISES_ON_RANK0)
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(tmp_path / "store"), where], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    out0, _ = procs[0].communicate(timeout=45)
    if where == "before":
        assert procs[0].returncode == 1 and "rank 0: stuck after" in out0, out0
        assert "RuntimeError: the kernel raised; rank 1 still ran" in out0, out0
        assert float(out0.split("stuck after ")[1].split(" s")[0]) < 20, out0
        procs[1].kill()  # as parity's replay does, once a rank's process ended
        procs[1].communicate()
    else:
        out1, _ = procs[1].communicate(timeout=45)
        assert procs[0].returncode == 0 and procs[1].returncode == 0, out0 + out1
        # rank 0's raise answers good, rank 1's run judged bad: the agreement is bad on both.
        assert "rank 0: try good=False, next agreement True" in out0 and "rank 1: try good=False, next agreement True" in out1, out0 + out1


HANGS = '''
import time
import torch.distributed as dist
from torch._dynamo import register_backend


@register_backend
def rank1_hangs(gm, example_inputs):
    if dist.get_rank() == 1:
        time.sleep(600)
    return gm
'''


def test_a_rank_that_hangs_ends_the_run_naming_the_ranks_and_where_they_were(parity_bin, collectives2, tmp_path):
    """Rank 1 hangs in its compile: rank 0, left waiting in the collective, fails with the group's
    own timeout (naming the operation), and the run ends every rank, saying where each was."""
    (tmp_path / "hang_backend.py").write_text(HANGS)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([parity_bin, "repro", "run", str(collectives2), "--backend", "torch_compile:rank1_hangs",
                        "--import", "hang_backend", "--collective-timeout", "4", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    error = report["error"]
    assert not report["pass"] and error.startswith("rank 0's process ended (exit 1)") and "Timed out" in error, report
    assert "rank 1, ended with it, was at:\nrank 1: graph graph_0: compiling and running it with rank1_hangs" in error, report


def test_verify_and_ci_take_multi_rank_dirs_with_a_record_per_rank(parity_bin, two_ranks, test_data, tmp_path):
    """verify over multi-rank dirs (here simulated: --backend eager) beside a plain repro dir: a
    record per rank, with its rank, its time split, its fp64 reference; a second run resumes them;
    `parity ci` gates them against an expected file that names each rank. DDP's ranks share no
    collective (the allreduce is the reducer's): each is verified as a repro dir of its own, its
    gradients and SGD step judged, any backend, a C++ one too. A trained TP block's ranks share
    collectives, and its backward was recorded as a graph of its own (AOTAutograd's partition of
    the DTensor graph): its records judge the shards' gradients as that graph's outputs."""
    dirs = [two_ranks / "collectives", two_ranks / "ddp", two_ranks / "tp"]
    plain = os.path.join(test_data, "models", "mlp")
    r, recs = verify(parity_bin, tmp_path / "v", *dirs, plain, "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [x for x in recs if "distributed" in x]
    assert len(ranks) == 6 and len(recs) == 7, recs
    for x in ranks:
        assert x["verification_code"] == "PASS" and x["fp64_reference"] is True, x
        ddp, tp = (x["model"]["model_name"].startswith(k) for k in ("ddp.", "tp."))
        assert x["distributed"]["replay"] == ("per-rank" if ddp else "simulated") and x["distributed"]["world_size"] == 2
        if ddp:
            assert any("/grad/param/" in o["path"] for o in x["outputs"]), x["outputs"]
        if not ddp:  # the eval collectives program has nothing to say; the trained TP block does
            notes = x.get("notes") or ""
            assert "not judged" not in notes, x
            assert ("gradients of graph_0 judged as their backward graphs' outputs" in notes) == tp, x
        if tp:
            grads = {o["path"] for o in x["outputs"] if o["path"].startswith("graph_0_backward/grad/")}
            assert grads == {f"graph_0_backward/grad/param/{p}" for p in ("up.weight", "up.bias", "down.weight", "down.bias")}, x["outputs"]
        assert x["model"]["model_name"].endswith(".rank%d" % x["distributed"]["rank"])
        phases = x["metrics"]["phase_seconds"]
        assert sum(phases.values()) == pytest.approx(x["metrics"]["wall_time_s"], rel=0.05), x["metrics"]
    again = run_parity(parity_bin, "verify", "--output-dir", str(tmp_path / "v"), *map(str, dirs), "--backend", "eager")
    assert again.returncode == 0 and "0 rank records, 0 passed, 4 resumed" in again.stdout, again.stdout
    assert "2 already in" in again.stdout, again.stdout  # ddp's ranks, resumed as repro dirs
    # The gate: an expected file names each rank.
    exp = tmp_path / "expected"
    exp.mkdir()
    for config in {x["experiment"]["config"] for x in ranks}:  # ddp's is a train capture
        rows = ["name,accuracy,graph_breaks"] + [f"{x['model']['model_name']},pass,{x['graph_breaks']}"
                                                 for x in ranks if x["experiment"]["config"] == config]
        (exp / f"{config}.csv").write_text("\n".join(rows) + "\n")
    r = run_parity(parity_bin, "ci", "--expected", str(exp), "--output-dir", str(tmp_path / "ci"), *map(str, dirs),
                   "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr
    gate = json.load(open(tmp_path / "ci" / "gate.json"))
    assert sorted(row["name"] for row in gate["rows"]) == sorted(x["model"]["model_name"] for x in ranks), gate
    # A backend that cannot run ranks for real is skipped per rank, saying why; ranks that share
    # no collective it runs as it runs any repro dir (here a fault in the relu fails each).
    r, recs = verify(parity_bin, tmp_path / "f", *dirs, "--backend", "fault", "--backend-option", "op=aten::relu")
    by = {x["model"]["model_name"]: x for x in recs}
    assert {by[f"collectives.rank{k}"]["verification_code"] for k in (0, 1)} == {"VERIFIER_SKIPPED"}, r.stdout + r.stderr
    assert all("no torch.compile backend" in by[f"collectives.rank{k}"]["error"] for k in (0, 1)), recs
    assert {by[f"ddp.rank{k}"]["verification_code"] for k in (0, 1)} == {"FAIL"}, r.stdout + r.stderr
