"""The comparison rules on a corpus (bench/rules_corpus.py) against same()."""
from __future__ import annotations

import datetime
import os
import sys

import torch

from harness import BUILD, cpu_name


def bench_rules(tmp: str, quick: bool) -> dict:
    """Issue 34's labelled corpus (bench/rules_corpus.py): same() and the calibrated rule judged on
    the same records, known-good and known-bad, in one run."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import rules_corpus
    r = rules_corpus.run(os.path.join(BUILD, "parity"), tmp, quick, rules_corpus.FAULT_MODELS)
    s = r["summary"]
    env = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "torch": torch.__version__}
    md = ["## Verdict rules: same() and the calibrated rule on a labelled corpus", "",
          f"Measured {env['date']} on {env['cpu']}, torch {env['torch']}, in one run of `bench/run_benchmarks.py --sections "
          f"rules` ({r['seconds'] / 60:.0f} min, {len(r['rows'])} records). " + rules_corpus.DESCRIPTION, "",
          f"Every record carries both verdicts; the calibration (the eager reruns that set the noise budgets, interpreter "
          f"runs only) took a median {s['calibration_s_median']:.2f} s per record, {100 * s['calibration_share_median']:.0f}% "
          f"of the record's wall time. {s['not_judged']} records got no verdict from either rule (a code other than "
          "PASS/FAIL) and are not counted.", ""] + rules_corpus.table(r)
    return {"summary": s, "seconds": r["seconds"], "markdown": md}


def run(tmp: str, a, env: dict) -> dict:
    return bench_rules(tmp, a.quick)
