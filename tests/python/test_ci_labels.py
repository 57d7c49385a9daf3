"""scripts/ci_labels.sh: the CI budget's rule for the labels after the suite, driven with a stub
ctest that only says what it was asked to run. A label runs when the time spent plus its cost fits
the budget, its cost scaled by the machine's pace (the suite's time against the reference, never
below it); 1 runs it regardless, 0 never."""
import os
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def label(spent_s, suite_s, want="auto", cost_s=300, **env):
    # The clock stopped (a stub `date`): a second ticking between the two reads would make the
    # boundary case (spent exactly to the budget) 1 s over it.
    script = ('ctest() { echo "RUN $*"; }\ndate() { echo 1900000000; }\n'
              f'start=$(( $(date +%s) - {spent_s} )); suite_s={suite_s}\n'
              'source scripts/ci_labels.sh\n'
              f'ci_label install {want} {cost_s} 1\n')
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    e.update(env)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=ROOT, env=e)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


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
        assert out == "RUN --test-dir build --output-on-failure -j1 -L install", out
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


def test_the_ci_script_sources_the_rule_and_runs_both_labels_through_it():
    text = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert "source scripts/ci_labels.sh" in text
    assert text.count("ci_label ") == 2 and "\nlabel " not in text
