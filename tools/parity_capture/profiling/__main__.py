"""`python -m parity_capture.profiling REQUEST.json RESULT.json` (docs/profile.md): one process per
profile, started by parity with a deadline."""
from __future__ import annotations

import json
import os
import sys

from .run import run_profile


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m parity_capture.profiling REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    import warnings
    warnings.filterwarnings("ignore")
    with open(argv[0]) as f:
        req = json.load(f)
    try:
        from ..host_ops import require_plugins
        require_plugins()  # --import: a backend plugin's registrations, before any compile
        result = {"ok": True, **run_profile(req)}
    except Exception as e:  # reported to parity with its type; the exit status stays 0
        import traceback
        result = {"ok": False, "error_type": type(e).__name__, "error": str(e).strip()[:4000],
                  "traceback": traceback.format_exc()[-8000:]}
    tmp = argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    from ..ending import end
    end(main())
