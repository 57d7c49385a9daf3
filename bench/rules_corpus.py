"""The labelled corpus of issue 34: how often same() and the calibrated rule (noise budgets) are
wrong, measured on the same records in one run.

Known good (no rule should fail them):
  - the suite models in float32, bfloat16 and amp, eval and train, compiled by Inductor,
    aot_eager and aot_eager_decomp_partition (the backends PyTorch's CI passes on its models);
  - the fault backend adding relative noise of the dtype's unit roundoff (2^-24 float32, 2^-8
    bfloat16) to every element of one op, early, in the middle or late in the graph.
Known bad (a rule should fail them):
  - the fault backend moving one op's every element by a relative 1e-2 ... 1e-5 (`perturb`) or
    by relative noise of that size (`noise`), early, in the middle or late, in float32 and
    bfloat16, in the forward (eval) and in the backward (train, the gradient the op's backward
    receives).
A known-bad case whose outputs are bitwise eager's (the fault rounded away, or never reached an
output) is no bug any rule could see: it is counted apart, not as a miss.

Every record carries both verdicts: its code is same()'s (`--rule same`, the default), and
each output's `noise_budget.check.within` is the calibrated rule's (results/record.h)."""
import collections
import concurrent.futures
import json
import os
import subprocess
import time

FAULT_MODELS = ["llama", "bert", "resnet", "dlrm"]
GOOD_BACKENDS = ["inductor", "aot_eager", "aot_eager_decomp_partition"]
DELTAS = [1e-2, 1e-3, 1e-4, 1e-5]
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8}
# Ops whose value is another's storage or metadata: a fault there is a fault of the op before.
VIEWS = ("aten::view", "aten::reshape", "aten::_unsafe_view", "aten::expand", "aten::permute", "aten::transpose",
         "aten::t", "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::alias", "aten::detach",
         "aten::_assert", "aten::clone", "aten::contiguous", "aten::lift_fresh", "aten::as_strided")
FLOATING = ("float32", "bfloat16", "float16", "float64")
SENSITIVITY_FACTORS = (2, 3, 4, 5, 6, 8)


DESCRIPTION = (
    "Known good: the suite models " + ", ".join(FAULT_MODELS) + " in float32, bfloat16 and amp, eval and train, compiled "
    "by " + ", ".join(GOOD_BACKENDS) + " (what PyTorch's CI passes), and the fault backend adding noise of the dtype's "
    "unit roundoff to one op's every element (relative), early, in the middle and late in the graph. Known bad: the "
    "fault backend moving one op's every element by a relative " + ", ".join(f"{d:g}" for d in DELTAS) + " (`perturb`) or "
    "by relative noise of that size (`noise`), at the same three places, in float32 and bfloat16, in the forward (eval) "
    "and in the backward (train: the gradient the op's backward receives). A known-bad case whose outputs are eager's "
    "bit for bit (the fault rounded away in bfloat16, or never reached an output) is no bug a rule could see: it is "
    "counted apart, not as a miss. same() is the default rule (`--rule same`); the calibrated rule (`--rule "
    "calibrated`) passes an output within its noise budget (results/record.h).")


def verify(parity: str, out: str, args: list) -> list:
    # --noise-budgets: both rules' verdicts on every record, a PASS under same() included
    subprocess.run([parity, "verify", "--noise-budgets", "--output-dir", out, *map(str, args)], capture_output=True, text=True)
    path = os.path.join(out, "results.jsonl")
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def capture_dirs(parity: str, tmp: str, models: list, cache: str) -> dict:
    """Each (model, test, dtype) the fault cases use, captured once (an eager-backend verify)."""
    verify(parity, os.path.join(tmp, "captures"), ["--model", *models, "--backend", "eager", "--test", "eval", "train",
                                                   "--dtype", "float32", "bfloat16", "--cache-dir", cache, "-j", "2"])
    dirs = {}
    root = os.path.join(cache, "captures")
    for name in os.listdir(root):
        model, test, dtype = name.split("-")[:3]
        dirs[(model, test, dtype)] = os.path.join(root, name)
    return dirs


def positions(repro: str) -> list:
    """(where, op, occurrence) of three single ops, 10%, 50% and 90% through the graph's floating
    values, in the fault backend's terms (a target prefix and its 1-based occurrence)."""
    m = json.load(open(os.path.join(repro, "manifest.json")))
    g = json.load(open(os.path.join(repro, m["graphs"][0]["file"])))
    calls = [n for n in g["nodes"] if n.get("op") == "call_function"]
    eligible = []
    for n in calls:
        vals = (n.get("meta") or {}).get("val") or []
        if len(vals) == 1 and vals[0] and vals[0].get("dtype") in FLOATING and \
                n["target"].startswith("aten::") and not n["target"].startswith(VIEWS):
            eligible.append(n)
    out = []
    for where, frac in (("early", 0.1), ("middle", 0.5), ("late", 0.9)):
        n = eligible[min(len(eligible) - 1, int(len(eligible) * frac))]
        occurrence = 1 + [c["name"] for c in calls if c["target"].startswith(n["target"])].index(n["name"])
        out.append((where, n["target"], occurrence))
    return out


def fault_cases(dirs: dict, models: list) -> list:
    """(labels, verify args) of every fault case."""
    cases = []
    for model in models:
        for dtype in ("float32", "bfloat16"):
            for test, phase in (("eval", "forward"), ("train", "backward")):
                repro = dirs.get((model, test, dtype))
                if repro is None:
                    continue
                for where, op, occ in positions(repro):
                    base = {"model": model, "dtype": dtype, "test": test, "phase": phase, "where": where, "op": op}
                    opts = [f"op={op}", f"occurrence={occ}", f"phase={phase}", "relative=1"]
                    cases.append(({**base, "label": "good", "kind": "noise", "delta": UNIT_ROUNDOFF[dtype]},
                                  opts + ["kind=noise", f"delta={UNIT_ROUNDOFF[dtype]!r}"], repro))
                    for kind in ("perturb", "noise"):
                        for delta in DELTAS:
                            cases.append(({**base, "label": "bad", "kind": kind, "delta": delta},
                                          opts + [f"kind={kind}", f"delta={delta!r}"], repro))
    return cases


def verdicts(rec: dict) -> dict:
    """Both rules' verdicts of one record, and whether the backend's outputs differ from eager's."""
    outputs = rec.get("outputs", [])
    calibrated = all(o["noise_budget"]["check"]["within"] if "noise_budget" in o else o.get("pass", False) for o in outputs)
    effect = any(((o.get("stats") or {}).get("max_abs_err") or 0) > 0 for o in outputs)
    budgets = [o["noise_budget"]["check"]["budgets"] for o in outputs if "noise_budget" in o]
    factors = [o["noise_budget"]["factor"] for o in outputs if "noise_budget" in o]
    return {"same": rec["verification_code"] == "PASS", "calibrated": calibrated, "effect": effect,
            "budgets": max(budgets) if budgets else None, "factor": factors[0] if factors else None,
            "measured": any("noise_budget" in o for o in outputs),
            "calibration_s": rec["metrics"].get("calibration_time_s", 0.0), "wall_s": rec["metrics"]["wall_time_s"]}


def run(parity: str, tmp: str, quick: bool, suite_models: list) -> dict:
    t0 = time.time()
    cache = os.path.join(tmp, "cache")
    models = FAULT_MODELS[:1] if quick else FAULT_MODELS
    rows = []
    # Known good: the suite compiled, every backend, dtype and test (one verify, two at a time).
    good_models = suite_models[:2] if quick else suite_models
    recs = verify(parity, os.path.join(tmp, "suite"),
                  ["--model", *good_models, "--backend", *(GOOD_BACKENDS[1:2] if quick else GOOD_BACKENDS),
                   "--dtype", "float32", "bfloat16", "amp", "--test", "eval", "train", "--cache-dir", cache, "-j", "2"])
    for rec in recs:
        ex = rec["experiment"]
        row = {"label": "good", "set": "suite", "model": rec["model"]["model_name"], "backend": ex["backend"],
               "dtype": ex["dtype"], "test": ex["test"], "code": rec["verification_code"]}
        if rec["verification_code"] in ("PASS", "FAIL"):
            row.update(verdicts(rec))
        rows.append(row)
    # The fault cases, two verify processes at a time.
    dirs = capture_dirs(parity, tmp, models, cache)
    cases = fault_cases(dirs, models)
    if quick:
        cases = cases[:12]

    def one(k):
        labels, opts, _ = cases[k]
        # the suite model through its cached capture: a suite capture holds the float32 graph and
        # the experiment runs it in the dtype asked
        args = ["--model", labels["model"], "--test", labels["test"], "--dtype", labels["dtype"], "--backend", "fault",
                "--cache-dir", cache]
        for o in opts:
            args += ["--backend-option", o]
        got = verify(parity, os.path.join(tmp, f"fault{k}"), args)
        row = {**labels, "set": "fault", "code": got[0]["verification_code"] if got else "NO_RECORD"}
        if got and got[0]["verification_code"] in ("PASS", "FAIL"):
            row.update(verdicts(got[0]))
        return row

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        rows += list(pool.map(one, range(len(cases))))
    return {"rows": rows, "seconds": time.time() - t0, "summary": summarize(rows)}


def summarize(rows: list) -> dict:
    judged = [r for r in rows if "same" in r]
    good = [r for r in judged if r["label"] == "good"]
    bad = [r for r in judged if r["label"] == "bad" and r["effect"]]
    s = {"good": len(good), "bad": len(bad),
         "no_effect": sum(1 for r in judged if r["label"] == "bad" and not r["effect"]),
         "not_judged": len(rows) - len(judged)}
    for rule in ("same", "calibrated"):
        s[f"{rule}_false_alarms"] = sum(1 for r in good if not r[rule])
        s[f"{rule}_misses"] = sum(1 for r in bad if r[rule])
    # The calibrated rule at other factors, from the same records: a budget is the factor times
    # the calibration's largest sample (or the rounding floor), so an output `b` budgets from fp64
    # at the factor it ran with is b * factor / f at f. An output without a budget is same()'s.
    s["factors"] = {}
    for f in SENSITIVITY_FACTORS:
        def within(r):
            if r.get("budgets") is None:
                return r["calibrated"]
            return r["budgets"] * r["factor"] / f <= 1.0
        s["factors"][str(f)] = {"false_alarms": sum(1 for r in good if not within(r)),
                                "misses": sum(1 for r in bad if within(r))}
    share = [r["calibration_s"] / r["wall_s"] for r in judged if r.get("wall_s")]
    s["calibration_share_median"] = sorted(share)[len(share) // 2] if share else 0.0
    s["calibration_s_median"] = sorted(r["calibration_s"] for r in judged)[len(judged) // 2] if judged else 0.0
    return s


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100.0 * n / d:.1f}%)" if d else "0/0"


def table(result: dict) -> list:
    rows, s = result["rows"], result["summary"]
    lines = ["| rule | false alarms on known-good | misses on known-bad |", "|---|---|---|",
             f"| same() (PyTorch's, the default) | {pct(s['same_false_alarms'], s['good'])} | {pct(s['same_misses'], s['bad'])} |",
             f"| calibrated (`--rule calibrated`) | {pct(s['calibrated_false_alarms'], s['good'])} | "
             f"{pct(s['calibrated_misses'], s['bad'])} |", ""]
    if s.get("factors"):
        lines += ["The calibrated rule at other factors (kBudgetFactor, compare/budget.h), from the same records "
                  "(an output's error in budgets scales as 1/factor):", "",
                  "| factor | false alarms on known-good | misses on known-bad |", "|---|---|---|"]
        for f, c in s["factors"].items():
            lines.append(f"| {f} | {pct(c['false_alarms'], s['good'])} | {pct(c['misses'], s['bad'])} |")
        lines.append("")
    # Misses by dtype and size, where the rules part.
    lines += ["| known-bad: dtype, test, relative size | cases | same() misses | calibrated misses | no effect (not counted) |",
              "|---|---|---|---|---|"]
    groups = collections.defaultdict(list)
    for r in rows:
        if r.get("label") == "bad" and "same" in r:
            groups[(r["dtype"], r["test"], r["delta"])].append(r)
    for (dtype, test, delta), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2])):
        hit = [r for r in rs if r["effect"]]
        lines.append(f"| {dtype}, {test}, {delta:g} | {len(hit)} | {sum(r['same'] for r in hit)} | "
                     f"{sum(r['calibrated'] for r in hit)} | {len(rs) - len(hit)} |")
    lines += ["", "| known-good set | cases | same() false alarms | calibrated false alarms |", "|---|---|---|---|"]
    kinds = collections.defaultdict(list)
    for r in rows:
        if r.get("label") == "good" and "same" in r:
            key = f"suite, {r['backend']}, {r['dtype']}" if r["set"] == "suite" else f"fault noise at unit roundoff, {r['dtype']}"
            kinds[key].append(r)
    for key, rs in sorted(kinds.items()):
        lines.append(f"| {key} | {len(rs)} | {sum(not r['same'] for r in rs)} | {sum(not r['calibrated'] for r in rs)} |")
    alarms = [r for r in rows if r.get("label") == "good" and "same" in r and not (r["same"] and r["calibrated"])]
    if alarms:
        lines += ["", "Known-good cases a rule failed:", ""]
        for r in alarms:
            what = f"{r['model']} {r.get('backend', 'fault')} {r['test']} {r['dtype']}" + (
                f" (noise at {r['where']} op {r['op']})" if r["set"] == "fault" else "")
            lines.append(f"- {what}: same() {'passes' if r['same'] else 'fails'}, calibrated "
                         f"{'passes' if r['calibrated'] else 'fails'}")
    lines.append("")
    return lines
