"""How parity's own Python processes end once their work is done and written: the exit handlers
run (Inductor's compile pool is shut down there, logging is flushed), stdio is flushed, and the
process ends without the interpreter's teardown of every module it imported. With torch, dynamo
and Inductor imported that teardown computes nothing anyone reads and took about 1 s (measured on
a 2-core CPU: `import torch, torch._dynamo, torch._inductor.compile_fx` then exit, 3.5-3.7 s
against 2.4 s ending here), in every worker, fork server and child that ends on its own."""
from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn


def end(code: "int | None") -> NoReturn:
    """Ends this process with `code` (None: 0), as sys.exit(code) would once main returned."""
    try:
        atexit._run_exitfuncs()  # noqa: SLF001 (what the interpreter's own exit runs first)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (a closed stream has nothing left to write)
                pass
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)
