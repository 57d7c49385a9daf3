"""scripts/ci_labels.sh: the CI budget's rule for the labels after the suite, driven with a stub
ctest that only says what it was asked to run. A label runs when the time spent plus its cost, and
the costs of the labels planned before it, fits the budget, each cost scaled by the machine's pace
(the suite's time against the reference, never below it); 1 runs it regardless, 0 never. The
labels planned run in one ctest, their entries at once."""
import os
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def labels(spent_s, suite_s, *plans, **env):
    """The script's output for ci_label with each of `plans` (name, want, cost, jobs), then
    ci_run_labels."""
    # The clock stopped (a stub `date`): a second ticking between the two reads would make the
    # boundary case (spent exactly to the budget) 1 s over it.
    script = ('ctest() { echo "RUN $*"; }\ndate() { echo 1900000000; }\n'
              f'start=$(( $(date +%s) - {spent_s} )); suite_s={suite_s}\n'
              'source scripts/ci_labels.sh\n' +
              "".join(f"ci_label {name} {want} {cost_s} {jobs}\n" for name, want, cost_s, jobs in plans) +
              "ci_run_labels\n")
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    e.update(env)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=ROOT, env=e)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def label(spent_s, suite_s, want="auto", cost_s=300, **env):
    return labels(spent_s, suite_s, ("install", want, cost_s, 2), **env)


@pytest.mark.parametrize("spent_s,suite_s,runs", [
    (1000, 300, True),    # a fast machine: the cost is never below its reference (300 s)
    (1380, 300, True),    # 1380 + 300 = 1680 (CI's 1800 less 120 kept spare): fits exactly
    (1381, 300, False),
    (1200, 605, True),    # a slow machine: 300 s at its pace is 300 * 605 / 420 = 432 s; 1632 fits
    (1300, 605, False),   # 1732 does not
])
def test_a_label_runs_when_its_cost_at_this_machines_pace_fits_the_budget(spent_s, suite_s, runs):
    out = label(spent_s, suite_s)
    if runs:
        assert out == "RUN --test-dir build --output-on-failure -j2 -L ^(install)$", out
    else:
        assert out.startswith("ci: ctest -L install left out: ") and f"(the suite took {suite_s} s)" in out, out
        cost = 300 * max(suite_s, 420) // 420
        assert f"it takes about {cost} s of the 1680 s budget" in out, out


def test_forced_either_way_and_the_budget_and_reference_from_the_environment():
    assert label(5000, 900, want="1").startswith("RUN ")
    assert "left out" in label(0, 300, want="0")
    assert "left out" in label(1000, 300, PARITY_CI_BUDGET_S="1200")
    # A reference of 200 s: a 400 s suite is twice as slow, 600 s of cost; 1000 + 600 fits 1680.
    assert label(1000, 400, PARITY_SUITE_REF_S="200").startswith("RUN ")
    assert "about 600 s" in label(1300, 400, PARITY_SUITE_REF_S="200")


def test_labels_that_fit_one_after_the_other_run_in_one_ctest_their_entries_at_once():
    both = [("sanitize", "auto", 300, 2), ("install", "auto", 300, 2)]
    assert labels(1000, 300, *both) == "RUN --test-dir build --output-on-failure -j4 -L ^(sanitize|install)$"
    # 1100 + 300 + 300 = 1700: the second is left out, naming what was planned before it.
    out = labels(1100, 300, *both).splitlines()
    assert out[0].startswith("ci: ctest -L install left out: 1100 s spent and 300 s planned"), out
    assert out[1] == "RUN --test-dir build --output-on-failure -j2 -L ^(sanitize)$", out
    # One left out by its own cost, the other still planned on its own.
    out = labels(1300, 300, ("sanitize", "auto", 500, 2), ("install", "auto", 300, 2)).splitlines()
    assert out[0].startswith("ci: ctest -L sanitize left out") and out[1].endswith("-j2 -L ^(install)$"), out
    # Nothing planned: no ctest at all.
    assert labels(1600, 300, *both).count("left out") == 2 and "RUN" not in labels(1600, 300, *both)


def test_the_ci_script_sources_the_rule_and_runs_both_labels_through_it():
    text = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert "source scripts/ci_labels.sh" in text
    assert text.count("ci_label ") == 2 and text.count("\nci_run_labels\n") == 1 and "\nlabel " not in text
