"""`parity report`: one self-contained HTML file from verify/ci results (and `parity profile`'s
records: per-category bars and the top kernels). The C++ side gathers
the experiments (records and, after a gate, their verdicts) into a JSON file; this renders it
with Jinja2 (templates/report.html) and draws each failing or drifting experiment's error
distributions with matplotlib as inline SVG: no scripts, no network, opens offline.

    python report.py DATA.json OUT.html

Run as a file (runtime/tool_script.h): it imports neither torch nor the package.
"""
import io
import json
import os
import sys
from collections import OrderedDict

import jinja2
import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller files, selectable

# Each entry's outcome (kind: pass, skipped, fail, error; label: the gate's verdict, else the
# code) is decided once, in C++ (report/reports.h); here it only picks a colour.
def label_of(entry) -> str:
    return entry["outcome"]["label"]


def weaker_rule(entry) -> str:
    """Why a weaker rule than the fp64 one decided (parity says it: results/record.h), or ""."""
    return entry["outcome"].get("weaker_rule", "")


def css_class_of(entry) -> str:
    kind, label = entry["outcome"]["kind"], entry["outcome"]["label"]
    if kind == "pass":
        return "good" if label in ("PASS", "XFAIL") and not weaker_rule(entry) else "warn"
    # A baseline to update (IMPROVED, NEW) fails the gate but is not a regression: amber, not red.
    return "warn" if kind == "skipped" or label in ("IMPROVED", "NEW") else "bad"


def svg_of(fig) -> str:
    """The figure as an inline SVG element (the XML prolog dropped: it goes into HTML), closed."""
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def histogram_svg(path: str, hist: dict) -> str:
    """|res - fp64| and |ref - fp64| per log10 bin, as step curves on one axis."""
    lo, hi, bins = hist["lo"], hist["hi"], hist["bins"]
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    fig, ax = plt.subplots(figsize=(6.4, 2.6), dpi=100)
    for key, colour, name in (("ref", "#4c78a8", "eager |ref − fp64|"), ("res", "#e45756", "backend |res − fp64|")):
        counts, xs = hist[key], [10 ** e for e in edges]
        if key == "ref":  # eager's own error: the floor the backend is judged against
            ax.stairs(counts, xs, color=colour, fill=True, alpha=0.3)
        ax.stairs(counts, xs, color=colour, linewidth=1.6, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("absolute error vs the fp64 reference")
    ax.set_ylabel("elements")
    ax.set_title(path, fontsize=10)
    extra = []
    for key in ("ref", "res"):
        if hist.get(f"{key}_zero"):
            extra.append(f"{key}: {hist[key + '_zero']} exact")
        if hist.get(f"{key}_nonfinite"):
            extra.append(f"{key}: {hist[key + '_nonfinite']} NaN/Inf")
    if extra:
        ax.text(0.99, 0.95, ", ".join(extra), transform=ax.transAxes, ha="right", va="top", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    return svg_of(fig)


# compare/budget.h's kUnboundedBudgets: how results.jsonl writes an error where the noise budget is
# zero (every eager run exact), which no finite count of budgets measures.
UNBOUNDED_BUDGETS = 1e300


def budgets_text(v) -> str:
    """An output's distance from fp64 in noise budgets, as the budgets column shows it."""
    return "beyond a budget of 0" if isinstance(v, (int, float)) and v >= UNBOUNDED_BUDGETS else fmt(v)


def fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "0" if v == 0 else (f"{v:.3g}" if 1e-3 <= abs(v) < 1e4 else f"{v:.2e}")
    return str(v)


CATEGORY_COLOURS = {"pointwise": "#4c78a8", "reduction": "#f58518", "persistent_reduction": "#e45756",
                    "template": "#72b7b2", "extern": "#54a24b", "other": "#bab0ac"}


def categories_svg(title: str, categories: list) -> str:
    """A profile's time per kernel category, as horizontal bars labelled with their share."""
    names = [c["category"] for c in categories][::-1]
    shares = [100 * c["share"] for c in categories][::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(names) + 0.9), dpi=100)
    bars = ax.barh(names, shares, color=[CATEGORY_COLOURS.get(n, "#888") for n in names])
    for bar, share in zip(bars, shares):
        ax.text(bar.get_width() + 1, bar.get_y() + bar.get_height() / 2, f"{share:.1f}%", va="center", fontsize=8)
    ax.set_xlim(0, 110)
    ax.set_xlabel("share of the compiled run's time")
    ax.set_title(title, fontsize=10)
    return svg_of(fig)


def build_profiles(profiles: list) -> list:
    out = []
    for p in profiles:
        s, b = p["speed"], p["breakdown"]
        title = f'{p["model"]} · {p["backend"]} · {p["test"]} · {p["dtype"]} · {p["device"]}'
        kernels = [{"name": ("bwd " if r.get("phase") == "backward" else "") + r["name"], "category": r["category"], "share": f'{100 * r["share"]:.1f}%',
                    "time": f'{r["time_us"]:.1f} µs', "calls": fmt(r["calls"]), "nodes": ", ".join(r["nodes"][:4]) +
                    (f' (+{len(r["nodes"]) - 4})' if len(r["nodes"]) > 4 else ""), "source": r.get("source", "")}
                   for r in b["rows"][:15]]
        out.append({"title": title, "device_name": p.get("device_name", ""),
                    "speed": f'eager {fmt(s["eager"]["median_ms"])} ms, {p["backend"]} {fmt(s["backend"]["median_ms"])} ms, '
                             f'speedup {s["speedup"]:.2f}x, compile {s["compile_s"]:.1f} s',
                    "busy": None if b.get("busy_percent") is None else f'{b["busy_percent"]:.1f}%',
                    "plot": categories_svg(title, b["categories"]) if b["categories"] else None,
                    "kernels": kernels, "more": max(0, len(b["rows"]) - 15),
                    "unit": "device time" if p["device"].startswith("cuda") else "self CPU time"})
    return out


def divergence_svg(title: str, divergence: list, culprit: str) -> str:
    """A minify run's divergence map along the graph: per exposed node (graph order), the
    backend's RMSE against fp64 over eager's (1 = inside the fp64 envelope eager's own error
    sets), log scale; failing nodes red, the culprit marked."""
    xs = list(range(len(divergence)))
    ratios = [max(min(e.get("error_ratio") or 1.0, 1e12), 1e-3) for e in divergence]
    colours = ["#e45756" if not e.get("pass", True) else "#4c78a8" for e in divergence]
    fig, ax = plt.subplots(figsize=(7.2, 2.8), dpi=100)
    ax.plot(xs, ratios, color="#bab0ac", linewidth=0.8, zorder=1)
    ax.scatter(xs, ratios, c=colours, s=12, zorder=2)
    ax.set_yscale("log")
    ax.axhline(1.0, color="#54a24b", linewidth=0.8, linestyle="--")
    for i, e in enumerate(divergence):
        if e.get("node") == culprit:
            ax.annotate(f'%{culprit}', (i, ratios[i]), textcoords="offset points", xytext=(4, 6), fontsize=8, color="#e45756")
            break
    ax.set_xlabel("graph nodes, in order (values the scan exposed)")
    ax.set_ylabel("backend / eager RMSE vs fp64")
    ax.set_title(title, fontsize=10)
    return svg_of(fig)


def build_minifies(minifies: list) -> list:
    out = []
    for m in minifies:
        culprit = (m.get("culprit") or {})
        loc = m.get("localization") or {}
        title = f'{os.path.basename(str(m["source"]).rstrip("/"))} · {m["backend"]}'
        how = loc.get("path", "")
        if loc.get("why"):
            how += f' ({loc["why"]})'
        first = next((e for e in m.get("divergence") or [] if not e.get("pass", True)), None)
        out.append({"title": title, "signature": (m.get("signature") or {}).get("kind", ""),
                    "summary": f'{m["ops_before"]} ops → {m["ops_after"]} ops, {m["backend_runs"]} backend runs, '
                               f'{m.get("wall_time_s", 0):.0f} s',
                    "culprit": f'%{culprit["node"]} ({culprit.get("target", "")})' if culprit.get("node") else "",
                    "source": (culprit.get("stack_trace") or "").strip().splitlines()[-2:] if culprit else [],
                    "how": how, "graph_text": m.get("graph_text", ""),
                    "compiler": (m.get("compiler_culprit") or {}).get("sentence", ""),
                    "beyond_budget": (m.get("first_beyond_budget") or {}).get("sentence", ""),
                    "first": None if first is None else {k: fmt(first.get(k)) for k in (
                        "node", "max_abs_err", "rmse_eager_vs_fp64", "rmse_backend_vs_fp64", "error_ratio")},
                    "plot": divergence_svg(title, m["divergence"], culprit.get("node", "")) if m.get("divergence") else None})
    return out


def rules_disagree(record) -> bool:
    """same() and the noise budget disagree on an output (results/record.h RulesDisagree)."""
    for o in record.get("outputs", []):
        check = (o.get("noise_budget") or {}).get("check") or {}
        if "same_pass" in o and "within" in check and o["same_pass"] != check["within"]:
            return True
    return False


def build_times(entries: list, phases: list) -> dict:
    """Where each experiment's wall time went (metrics.phase_seconds), one row per experiment and
    a column per phase that took any time (phases: results/phases.h's list, in its order), then
    the totals."""
    rows, totals, wall = [], {}, 0.0
    for e in entries:
        r = e["record"]
        m = r.get("metrics") or {}
        split = m.get("phase_seconds") or {}
        if not split:
            continue
        ex = r["experiment"]
        rows.append({"title": f'{r["model"]["model_name"]} · {ex["backend"]} · {ex["test"]} · {ex["dtype"]}',
                     "wall": m.get("wall_time_s", 0.0), "split": split,
                     "peak": ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in (m.get("peak_memory_bytes") or {}).items())})
        wall += m.get("wall_time_s", 0.0)
        for k, v in split.items():
            totals[k] = totals.get(k, 0.0) + v
    shown = [p for p in phases if totals.get(p["name"], 0) > 0]
    shown += [{"name": k, "meaning": ""} for k in totals if k not in {p["name"] for p in phases}]
    def cells(split):
        return [f'{split.get(p["name"], 0):.2f}' if split.get(p["name"]) else "" for p in shown]
    return {"phases": shown, "rows": [{**row, "cells": cells(row["split"]), "wall": f'{row["wall"]:.1f}'}
                                      for row in rows],
            "total": {"wall": f"{wall:.1f}", "cells": cells(totals),
                      "shares": [f'{100 * totals.get(p["name"], 0) / wall:.0f}%' if wall else "" for p in shown]}}


def build(data: dict) -> dict:
    entries = data["entries"]
    columns, rows = OrderedDict(), OrderedDict()
    for e in entries:
        r = e["record"]
        ex = r["experiment"]
        col = f'{ex["backend"]} · {ex["test"]} · {ex["dtype"]} · {ex["accelerator"]}'
        columns[col] = True
        cell = {"label": label_of(e), "cls": css_class_of(e), "anchor": r["fingerprint"]}
        gate = e.get("gate") or {}
        if gate.get("expected") and gate.get("status") and gate["expected"] != gate["status"]:
            cell["change"] = f'{gate["expected"]} → {gate["status"]}'
        rows.setdefault(r["model"]["model_name"], {})[col] = cell
    details = []
    for e in entries:
        label, cls = label_of(e), css_class_of(e)
        r = e["record"]
        if ((cls == "good" and label != "XFAIL") or e["outcome"]["kind"] == "skipped") and not weaker_rule(e) \
                and not rules_disagree(r):
            continue
        gate = e.get("gate") or {}
        outputs = []
        for o in r.get("outputs", []):
            st = o.get("stats") or {}
            check = (o.get("noise_budget") or {}).get("check") or {}
            outputs.append({"path": o.get("path"), "pass": o.get("pass", True), "rule": o.get("rule", ""),
                            "budgets": budgets_text(check.get("budgets")) if check else "",
                            "message": o.get("message", ""),
                            "cells": [fmt(st.get(k)) for k in ("numel", "max_abs_err", "max_rel_err", "rmse_res_vs_fp64",
                                                               "rmse_ref_vs_fp64", "cosine", "mismatches")],
                            "plot": histogram_svg(o.get("path", "output"), o["error_hist"]) if o.get("error_hist") and (
                                not o.get("pass", True) or label == "DRIFT") else None})
        # A drifting output passes; plot the first outputs anyway when none failed.
        if not any(o["plot"] for o in outputs):
            for o, raw in zip(outputs, r.get("outputs", [])):
                if raw.get("error_hist"):
                    o["plot"] = histogram_svg(raw.get("path", "output"), raw["error_hist"])
                    break
        ex = r["experiment"]
        details.append({"anchor": r["fingerprint"], "label": label, "cls": cls,
                        "title": f'{r["model"]["model_name"]} · {ex["backend"]} · {ex["test"]} · {ex["dtype"]} · {ex["accelerator"]}',
                        "error": r.get("error", ""), "repro_dir": r.get("repro_dir", ""),
                        "why": r.get("justification", "") if label != "PASS" or rules_disagree(r) else "",
                        "note": "; ".join(dict.fromkeys(n for n in (gate.get("note", ""), weaker_rule(e)) if n)),
                        "expected": gate.get("expected", ""), "status": gate.get("status", ""),
                        "culprit": gate.get("culprit"), "compiler": gate.get("compiler_culprit", ""),
                        "outputs": outputs[:24], "more": max(0, len(outputs) - 24)})
    counts, classes = OrderedDict(), {}
    for e in entries:
        counts[label_of(e)] = counts.get(label_of(e), 0) + 1
        classes[label_of(e)] = css_class_of(e)
    return {"title": data.get("title", "parity report"), "sources": data.get("sources", []), "columns": list(columns),
            "rows": rows, "details": details, "counts": [(k, v, classes[k]) for k, v in counts.items()],
            "stat_names": ["numel", "max abs", "max rel", "rmse res–fp64", "rmse ref–fp64", "cosine", "mismatches"],
            "profiles": build_profiles(data.get("profiles", [])), "minifies": build_minifies(data.get("minifies", [])),
            "times": build_times(entries, data.get("phases", []))}


def render(data: dict) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(here, "templates")),
                             autoescape=jinja2.select_autoescape(["html"]))
    return env.get_template("report.html").render(**build(data))


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    html = render(data)
    with open(argv[2], "w") as f:
        f.write(html)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
