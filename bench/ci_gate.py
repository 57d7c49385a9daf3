"""The pre-merge accuracy gate written in Python, the way PyTorch's CI does it: the dynamo
runner's loop (one fresh process per model, `bench/verify_flow.py` doing what `--accuracy`
does, a timeout, the status recorded as `dev,name,batch_size,accuracy`), then a
check_accuracy.py-style comparison of each configuration's CSV with its expected file
(PASS / XFAIL / FAIL / IMPROVED / MISSING). Prints a JSON line with the verdicts.

    python bench/ci_gate.py --expected DIR --models llama mlp --workdir W
"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_model(name: str, backend: str, timeout: int) -> str:
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, "verify_flow.py"), "--model", name, "--backend", backend],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    out = r.stdout.strip().splitlines()
    word = out[-1].split()[0] if out else ""
    return {"PASS": "pass", "FAIL": "fail_accuracy", "NONDETERMINISTIC_EAGER_RUN": "eager_two_runs_differ"}.get(word, "fail_to_run")


def compare(actual: dict, expected: dict) -> dict:
    verdicts = {}
    for name, status in actual.items():
        want = expected.get(name)
        if want is None:
            verdicts[name] = "MISSING_EXPECTED"
        elif status == want:
            verdicts[name] = "PASS" if want == "pass" else "XFAIL"
        else:
            verdicts[name] = "IMPROVED" if status == "pass" else "FAIL"
    for name in expected:
        verdicts.setdefault(name, "MISSING_ACCURACY")
    return verdicts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--expected", required=True)
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=int, default=1800)
    a = ap.parse_args()
    from parity_capture import models
    os.makedirs(a.workdir, exist_ok=True)
    by_config = {}
    for name in a.models:
        config = f"cpu_{a.backend}_{models.MODELS[name].suite}_inference"
        by_config.setdefault(config, {})[name] = run_model(name, a.backend, a.timeout)
    verdicts, failed = {}, False
    for config, actual in by_config.items():
        with open(os.path.join(a.workdir, config + ".csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["dev", "name", "batch_size", "accuracy"])
            for name, status in actual.items():
                w.writerow(["cpu", name, models.MODELS[name].batch_size, status])
        with open(os.path.join(a.expected, config + ".csv")) as f:
            expected = {row["name"]: row["accuracy"] for row in csv.DictReader(f)}
        expected = {n: s for n, s in expected.items() if n in a.models}
        for name, v in compare(actual, expected).items():
            verdicts[name] = v
            failed |= v not in ("PASS", "XFAIL")
    print(json.dumps({"verdicts": verdicts, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
