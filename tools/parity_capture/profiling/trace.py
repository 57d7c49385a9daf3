"""One chrome/Perfetto trace of several profiles, each its own process."""
from __future__ import annotations

import json
import os
from typing import List


def merge_traces(parts: List[tuple], out_path: str) -> None:
    """One chrome/Perfetto trace of several profiles: each part's processes renamed
    '<label>: <name>' and their pids moved apart so the parts do not interleave."""
    events = []
    for i, (label, path) in enumerate(parts):
        with open(path) as f:
            data = json.load(f)
        offset = i * 10_000_000
        named = set()
        for ev in data.get("traceEvents", []):
            if isinstance(ev.get("pid"), int):
                ev["pid"] += offset
            if ev.get("ph") == "M" and ev.get("name") == "process_name":
                ev.setdefault("args", {})["name"] = f"{label}: {ev.get('args', {}).get('name', '')}".rstrip(": ")
                named.add(ev.get("pid"))
            events.append(ev)
        for pid in {ev.get("pid") for ev in data.get("traceEvents", []) if isinstance(ev.get("pid"), int)} - named:
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, out_path)
