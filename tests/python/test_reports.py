"""The reports parity writes: accuracy.csv (the dynamo runner's columns and statuses), junit.xml
read by a real consumer (junitparser), summary.md appended to $GITHUB_STEP_SUMMARY, and the HTML
report rendered in headless Chromium (Debian's package) with the network off: its plots drawn,
no console errors, nothing fetched."""
import csv
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

from test_ci import fault, parity


@pytest.fixture
def gated(parity_bin, dirs, tmp_path):
    """A real gate: mlp regressed (FAIL), llama passes, bert an expected failure (XFAIL)."""
    exp = tmp_path / "expected"
    exp.mkdir()
    (exp / "cpu_fault_repro_inference.csv").write_text("name,accuracy,graph_breaks\nbert,fail_accuracy,0\nllama,pass,0\nmlp,pass,0\n")
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    out = tmp_path / "out"
    r = parity(parity_bin, "ci", "--expected", exp, dirs["mlp"], dirs["llama"], dirs["bert"],
               *fault("op=aten::gelu", "delta=1"), "--retries", "0", "--output-dir", out, GITHUB_STEP_SUMMARY=str(summary))
    assert r.returncode == 1, r.stdout + r.stderr
    return out, summary


def test_accuracy_csv_has_the_runners_columns_and_statuses(gated):
    out, _ = gated
    rows = list(csv.DictReader(open(out / "accuracy.csv")))
    assert list(rows[0])[:4] == ["dev", "name", "batch_size", "accuracy"]
    assert {r["name"]: r["accuracy"] for r in rows} == {"mlp": "fail_accuracy", "llama": "pass", "bert": "fail_accuracy"}
    assert {r["dev"] for r in rows} == {"cpu"}


def test_junit_xml_reads_in_junitparser(gated):
    junitparser = pytest.importorskip("junitparser")
    out, _ = gated
    xml = junitparser.JUnitXml.fromfile(str(out / "junit.xml"))
    cases = {case.name: case for suite in xml for case in suite}
    assert sorted(cases) == ["bert fault eval float32", "llama fault eval float32", "mlp fault eval float32"]
    mlp = cases["mlp fault eval float32"]
    assert len(mlp.result) == 1 and isinstance(mlp.result[0], junitparser.Failure)
    assert "fail_accuracy, expected pass" in mlp.result[0].message and "RMSE" in mlp.result[0].message
    assert "max abs" in mlp.result[0].text
    assert cases["llama fault eval float32"].is_passed and cases["bert fault eval float32"].is_passed  # XFAIL passes
    suite = next(iter(xml))
    assert suite.tests == 3 and suite.failures == 1


def test_summary_md_is_appended_to_the_github_step_summary(gated):
    out, step = gated
    md = (out / "summary.md").read_text()
    assert md.startswith("## parity ci: FAILED") and "| mlp | fault |" in md and "XFAIL" in md
    assert step.read_text() == "earlier step\n" + md + "\n"


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no chromium (setup.sh installs Debian's)")


def test_html_report_renders_offline_with_its_plots(parity_bin, gated, tmp_path):
    Image = pytest.importorskip("PIL.Image")
    out, _ = gated
    html = tmp_path / "report.html"
    r = parity(parity_bin, "report", out, "-o", html)
    assert r.returncode == 0 and "3 experiments (3 with gate verdicts)" in r.stdout, r.stdout + r.stderr
    text = html.read_text()
    assert "<script" not in text and not re.search(r'<(link|img|iframe)[^>]+(href|src)="https?:', text)
    assert text.count("<svg") >= 2  # mlp's FAIL and bert's XFAIL each plot their output
    shot = tmp_path / "shot.png"
    # The network is off: every fetch would go to a dead proxy and fail in the console log.
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--enable-logging=stderr",
                        "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2400",
                        f"--screenshot={shot}", html.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), r.stderr[-3000:]
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Failed to load resource" in l]
    assert not console, console
    img = Image.open(shot).convert("RGB")
    px = img.load()
    w, h = img.size
    # The plots' curves: the backend's errors in red (#e45756), eager's in blue (#4c78a8).
    def count(rgb, tol=40):
        return sum(1 for y in range(0, h, 2) for x in range(0, w, 2)
                   if all(abs(a - b) <= tol for a, b in zip(px[x, y], rgb)))
    assert count((0xe4, 0x57, 0x56)) > 50, "the backend's error curve did not draw"
    assert count((0x4c, 0x78, 0xa8)) > 50, "eager's error curve did not draw"
    # The matrix drew too: the FAIL cell's red and the PASS cell's green.
    assert count((0xf8, 0xd0, 0xcd), 6) > 50 and count((0xd9, 0xf2, 0xdc), 6) > 50


def test_progress_on_a_tty_plain_lines_otherwise(parity_bin, dirs, tmp_path):
    if not shutil.which("script"):
        pytest.skip("no script(1) to give parity a terminal")
    args = [parity_bin, "verify", dirs["mlp"], *fault("op=aten::gelu", "kind=hang"), "--timeout", "3",
            "--output-dir", str(tmp_path / "tty")]
    tty = subprocess.run(["script", "-qec", " ".join(map(str, args)), "/dev/null"], capture_output=True, text=True,
                         timeout=120)
    # The live line: experiment i/N, its current phase (read from the running child), elapsed seconds.
    assert re.search(r"[\r\n]\x1b\[K\[1/1\] mlp fault eval float32: backend \d+s", tty.stdout), repr(tty.stdout[-800:])
    plain = parity(parity_bin, *args[1:-2], "--output-dir", tmp_path / "plain")
    assert "\x1b[K" not in plain.stdout and "[1/1] mlp fault eval float32: VERIFIER_DIDNT_RUN" in plain.stdout, plain.stdout


def test_the_budgets_column_says_an_error_where_the_budget_is_zero_in_words():
    """results.jsonl writes an error where the noise budget is zero (every eager run exact) as
    compare/budget.h's kUnboundedBudgets (JSON has no infinity); the HTML report's budgets column
    says so in words, not as 1.00e+300. report.py is loaded as the file parity runs (torch-free)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "parity_capture", "report.py")
    spec = importlib.util.spec_from_file_location("parity_report", path)
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    assert report.budgets_text(1e300) == "beyond a budget of 0"
    assert report.budgets_text(37.2) == "37.2"
    assert report.budgets_text(None) == "–"
