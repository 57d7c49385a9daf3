"""Justified verdicts (issue 34): every output gets a noise budget measured from eager itself
(reruns with inputs and parameters moved one ulp, another thread count, eager's own error against
fp64). The budget grows with the graph's reduction lengths and with its dtype; a rounding-level
noise fault passes both rules; a 1e-3 perturbation of one op fails the calibrated rule with a
justification naming that op's output, in the terminal, summary.md, junit.xml and the HTML
report; the divergence scan names the first node beyond its own budget; `parity ci --rule
calibrated` gates by it."""
import json
import os

import torch

from conftest import verify, run_parity
from parity_capture import capture


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


class TwoHeads(torch.nn.Module):
    """Two outputs from two separate linears: a fault in the second shows in `tail` only."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 32)
        self.tail = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head(h), torch.tanh(self.tail(h))


def fault(*opts):
    args = ["--backend", "fault"]
    for o in opts:
        args += ["--backend-option", o]
    return args


def budget_of(record, k=0):
    return record["outputs"][k]["noise_budget"]


def two_heads(tmp_path):
    torch.manual_seed(0)
    d = tmp_path / "two_heads"
    capture(TwoHeads(), (torch.randn(8, 32),), str(d))
    return d


def test_budget_grows_with_reduction_length_and_dtype(parity_bin, tmp_path):
    g = torch.Generator().manual_seed(0)
    relative, absolute = {}, {}
    for k in (16, 4096):
        a, b = torch.randn(8, k, generator=g), torch.randn(k, 8, generator=g)
        exact_rms = (a.double() @ b.double()).pow(2).mean().sqrt().item()
        for dt in (torch.float32, torch.bfloat16):
            d = tmp_path / f"mm{k}-{dt}"
            capture(MatMul(), (a.to(dt), b.to(dt)), str(d))
            r, recs = verify(parity_bin, tmp_path / f"out{k}-{dt}", d, "--backend", "eager", "--noise-budgets")
            assert r.returncode == 0, r.stdout + r.stderr
            nb = budget_of(recs[0])
            # The record states the rule: quantile x factor over the calibration runs, which are
            # eager's own error, three ulp seeds and another thread count.
            assert nb["quantile"] == 1.0 and nb["factor"] == 4.0
            assert [s["run"] for s in nb["runs"]][:4] == ["eager", "ulp seed 1", "ulp seed 2", "ulp seed 3"]
            assert nb["runs"][-1]["run"].startswith("threads ")
            assert recs[0]["metrics"]["calibration_time_s"] > 0
            relative[(k, dt)] = nb["rmse"] / exact_rms
            absolute[(k, dt)] = nb["rmse"]
    for dt in (torch.float32, torch.bfloat16):
        assert absolute[(4096, dt)] > 4 * absolute[(16, dt)], absolute
    # float32 accumulates in float32: longer reductions round more, relative to the result too
    # (bfloat16 matmuls accumulate in float32 and round once: their inputs' ulps dominate).
    assert relative[(4096, torch.float32)] > 2 * relative[(16, torch.float32)], relative
    for k in (16, 4096):
        assert relative[(k, torch.bfloat16)] > 100 * relative[(k, torch.float32)], relative


def test_rounding_noise_passes_both_rules(parity_bin, tmp_path):
    d = two_heads(tmp_path)
    # Relative noise of the float32 unit roundoff on one op's every element, drawn anew each call.
    args = fault("op=aten::linear", "occurrence=2", "kind=noise", "relative=1", f"delta={2.0 ** -24}")
    for rule in ("same", "calibrated"):
        r, recs = verify(parity_bin, tmp_path / rule, d, *args, "--rule", rule, "--noise-budgets")
        assert r.returncode == 0, r.stdout + r.stderr
        assert recs[0]["verification_code"] == "PASS", recs[0]
        assert recs[0]["rule"] == rule
        assert all(o["noise_budget"]["check"]["within"] for o in recs[0]["outputs"])
        assert recs[0]["justification"].startswith("every output"), recs[0]["justification"]


def test_perturbed_op_fails_with_a_justification_naming_its_output(parity_bin, tmp_path):
    d = two_heads(tmp_path)
    args = fault("op=aten::linear", "occurrence=3", "kind=perturb", "relative=1", "delta=1e-3")  # the tail linear
    out = tmp_path / "calibrated"
    r, recs = verify(parity_bin, out, d, *args, "--rule", "calibrated")
    assert r.returncode == 1, r.stdout + r.stderr
    rec = recs[0]
    assert rec["verification_code"] == "FAIL"
    head, tail = rec["outputs"]
    assert head["pass"] and head["noise_budget"]["check"]["within"]
    assert not tail["pass"] and tail["rule"] == "noise_budget"
    check = tail["noise_budget"]["check"]
    assert check["budgets"] > 10 and check["exceeding"] > 0 and len(check["worst"]["index"]) == 2
    why = rec["justification"]
    assert why.startswith(tail["path"] + ": "), why
    assert "noise budgets from fp64" in why and "elements exceed it, the worst at [" in why, why
    # Said where people read it: the terminal, summary.md, junit.xml, the HTML report.
    assert "why: " + why in r.stdout, r.stdout
    assert "why: " in (out / "summary.md").read_text()
    assert "noise budgets from fp64" in (out / "junit.xml").read_text()
    html = tmp_path / "report.html"
    rr = run_parity(parity_bin, "report", str(out / "results.jsonl"), "-o", str(html))
    assert rr.returncode == 0, rr.stdout + rr.stderr
    assert "noise budgets from fp64" in html.read_text()
    # same() sees a 1e-3 relative error too (tol 1e-4); the budget says by how much.
    r, recs = verify(parity_bin, tmp_path / "same", d, *args)
    assert recs[0]["verification_code"] == "FAIL" and recs[0]["rule"] == "same"
    assert recs[0]["justification"].startswith("same() fails " + tail["path"] + ": "), recs[0]["justification"]
    # A 2e-5 one it does not (within its allclose): the record says the budget disagrees, and the
    # terminal says why on the PASS line.
    small = fault("op=aten::linear", "occurrence=3", "kind=perturb", "relative=1", "delta=2e-5")
    r, recs = verify(parity_bin, tmp_path / "small", d, *small, "--noise-budgets")
    assert recs[0]["verification_code"] == "PASS", recs[0]
    assert recs[0]["outputs"][1]["same_pass"] and not recs[0]["outputs"][1]["noise_budget"]["check"]["within"]
    assert "same() passes every output, but " + tail["path"] in recs[0]["justification"]
    assert "why: same() passes every output" in r.stdout, r.stdout


def test_budgets_are_measured_where_a_rule_or_a_failure_needs_them(parity_bin, tmp_path):
    """By default same() decides without calibration runs where it passes every output; a failing
    output gets its budget (rounding or values: what minify's signature tells apart); the
    calibrated rule and --noise-budgets measure every output's."""
    d = two_heads(tmp_path)
    quiet = fault("op=aten::linear", "occurrence=3", "kind=noise", "relative=1", f"delta={2.0 ** -24}")
    r, recs = verify(parity_bin, tmp_path / "pass", d, *quiet)
    assert recs[0]["verification_code"] == "PASS", recs[0]
    assert not any("noise_budget" in o for o in recs[0]["outputs"]), recs[0]["outputs"]
    assert "calibration_time_s" not in recs[0]["metrics"] and "calibration" not in recs[0]["metrics"]["phase_seconds"]
    loud = fault("op=aten::linear", "occurrence=3", "kind=perturb", "relative=1", "delta=1e-3")
    r, recs = verify(parity_bin, tmp_path / "fail", d, *loud)
    assert recs[0]["verification_code"] == "FAIL", recs[0]
    assert all("noise_budget" in o for o in recs[0]["outputs"]), recs[0]["outputs"]  # the failing graph's outputs
    assert recs[0]["metrics"]["phase_seconds"]["calibration"] > 0
    for extra in (["--rule", "calibrated"], ["--noise-budgets"]):
        r, recs = verify(parity_bin, tmp_path / extra[-1], d, *quiet, *extra)
        assert recs[0]["verification_code"] == "PASS" and all("noise_budget" in o for o in recs[0]["outputs"]), recs[0]


def test_backward_fault_names_the_gradient(parity_bin, tmp_path):
    torch.manual_seed(0)
    d = tmp_path / "train"
    capture(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)), (torch.randn(8, 16),),
            str(d), mode="train", loss_fn=lambda out: out.pow(2).mean())
    args = fault("op=aten::gelu", "phase=backward", "kind=perturb", "relative=1", "delta=1e-3")
    r, recs = verify(parity_bin, tmp_path / "out", d, *args, "--rule", "calibrated")
    assert recs[0]["verification_code"] == "FAIL", recs[0]
    failing = [o["path"] for o in recs[0]["outputs"] if not o["pass"]]
    # The gradient entering gelu's backward is off: the first linear's gradients are, the second's not.
    assert any(p.startswith("grad/") and "0." in p for p in failing), failing
    assert not any("2." in p and p.startswith("grad/") for p in failing), failing
    assert recs[0]["justification"].split(": ")[0] in failing


def test_divergence_scan_names_the_first_node_beyond_its_budget(parity_bin, tmp_path):
    d = two_heads(tmp_path)
    r, recs = verify(parity_bin, tmp_path / "out", d, *fault("op=aten::relu", "kind=perturb", "relative=1", "delta=1e-3"),
                     "--rule", "calibrated")
    assert recs[0]["verification_code"] == "FAIL"
    failure = recs[0]["repro_dir"]
    assert json.load(open(os.path.join(failure, "manifest.json")))["failure"]["rule"] == "calibrated"
    out = tmp_path / "minify"
    m = run_parity(parity_bin, "minify", failure, "--out", str(out), "--no-compiler-bisect")
    assert m.returncode == 0, m.stdout + m.stderr
    s = json.load(open(out / "summary.json"))
    assert s["rule"] == "calibrated"
    first = s["first_beyond_budget"]
    assert first["target"].startswith("aten::relu") and first["budgets"] > 1, first
    assert "the first value to leave its own noise budget is %" + first["node"] in m.stdout


def test_ci_gates_by_the_calibrated_rule(parity_bin, tmp_path):
    d = two_heads(tmp_path)
    exp = tmp_path / "expected"
    os.makedirs(exp)
    (exp / "cpu_fault_repro_inference.csv").write_text("name,accuracy,graph_breaks\nTwoHeads,pass,0\n")
    args = fault("op=aten::linear", "occurrence=3", "kind=perturb", "relative=1", "delta=2e-5")  # same() passes it
    same = run_parity(parity_bin, "ci", "--expected", str(exp), "--output-dir", str(tmp_path / "same"), str(d), *args)
    assert same.returncode == 0, same.stdout + same.stderr
    cal = run_parity(parity_bin, "ci", "--expected", str(exp), "--output-dir", str(tmp_path / "cal"), str(d), *args,
                     "--rule", "calibrated")
    assert cal.returncode == 1, cal.stdout + cal.stderr
    assert "noise budgets from fp64" in (tmp_path / "cal" / "junit.xml").read_text()


def test_bad_rule_is_exit_2(parity_bin, tmp_path):
    r = run_parity(parity_bin, "verify", "--model", "mlp", "--rule", "loose", "--output-dir", str(tmp_path))
    assert r.returncode == 2 and "--rule" in r.stderr, r.stderr


def test_corpus_table_counts_both_rules_from_real_records(parity_bin, tmp_path):
    """bench/rules_corpus.py's verdicts, counts and table on records verify wrote: a rounding-level
    fault is known good, a 1e-3 and a 2e-5 perturbation known bad (same() misses the second, the
    calibrated rule does not), a fault that changes no output (no such node) is counted apart."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import rules_corpus
    d = two_heads(tmp_path)
    # (label, kind, delta, occurrence): the third linear is the tail's; there is no 9th
    cases = [("good", "noise", 2.0 ** -24, 3), ("bad", "perturb", 1e-3, 3), ("bad", "perturb", 2e-5, 3),
             ("bad", "perturb", 1e-3, 9)]
    rows = []
    for k, (label, kind, delta, occ) in enumerate(cases):
        _, recs = verify(parity_bin, tmp_path / f"c{k}", d, "--noise-budgets",
                         *fault("op=aten::linear", f"occurrence={occ}", f"kind={kind}", "relative=1", f"delta={delta!r}"))
        rows.append({"label": label, "set": "fault", "model": "two_heads", "dtype": "float32", "test": "eval",
                     "delta": delta, "where": "late", "op": "aten::linear", "code": recs[0]["verification_code"],
                     **rules_corpus.verdicts(recs[0])})
    s = rules_corpus.summarize(rows)
    assert (s["good"], s["bad"], s["no_effect"]) == (1, 2, 1), s
    assert s["same_false_alarms"] == 0 and s["calibrated_false_alarms"] == 0, s
    assert s["same_misses"] == 1 and s["calibrated_misses"] == 0, s
    text = "\n".join(rules_corpus.table({"rows": rows, "summary": s}))
    assert "| same() (PyTorch's, the default) | 0/1 (0.0%) | 1/2 (50.0%) |" in text, text
    assert "| calibrated (`--rule calibrated`) | 0/1 (0.0%) | 0/2 (0.0%) |" in text, text
