"""PyTorch's own repro scripts as repro dirs (`parity import`, docs/format.md "Imported scripts"):
an after_aot `repro.py` or `minifier_launcher.py` (TORCHDYNAMO_REPRO_AFTER="aot") and tlparse's
`fx_graph_runnable.py`. Each defines a module `Repro` (instantiated as `mod`) holding the graph
Inductor was given, and `load_args(reader)`, which names every input: its storage (by content
hash, stored under the save dir the script's `run_repro(...)` call names) and its view.

The script is the user's own code and runs as capture runs a program: in this child process, as a
module (its `if __name__ == "__main__":` block does not run), never inside parity. Its inputs are
read as PyTorch's `InputReader` reads them: each storage from the save dir when it is there,
random data where it is not (the manifest's `imported_from.generated_storages` counts those), then
the module is captured on them with capture(), so the dir holds the values parity verifies with.
after_aot scripts come from Inductor: the dir names `inductor` as its backend, with the Inductor
settings the script makes as its options, so `parity minify DIR` needs no --backend."""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from typing import Optional

import torch

from .capture import capture
from .errors import CaptureError

_SAVE_DIR = re.compile(r"\bsave_dir\s*=\s*(r?'[^'\n]*'|r?\"[^\"\n]*\"|None)")
_COMMAND = re.compile(r"\bcommand\s*=\s*['\"](\w+)['\"]")
_INDUCTOR_SETTING = re.compile(r"^torch\._inductor\.config\.([\w.]+)\s*=\s*(.+?)\s*$", re.M)


def _inductor_settings(text: str):
    """The Inductor settings the script makes (`torch._inductor.config.X = <literal>` lines, as
    after_aot writes the settings the failing compile ran with): the dir's backend options."""
    options = {}
    for key, value in _INDUCTOR_SETTING.findall(text):
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            continue  # not a literal (an object, a call): left to the compile's defaults
    return options


_REPR_SETTING = re.compile(r"^(\s*)(torch\.[\w.]*config\.[\w.]+)\s*=\s*<[^\n]*>\s*$", re.M)


def _runnable(text: str):
    """The script's source with each config setting whose value after_aot could write only as an
    object's repr (`torch._inductor.config.post_grad_custom_post_pass = <function ...>`, not Python:
    pytorch/pytorch#128830) turned into a comment, and the settings so dropped: that object cannot
    be made again from its repr, and the rest of the script runs without it."""
    dropped = [m.group(2) for m in _REPR_SETTING.finditer(text)]
    source = _REPR_SETTING.sub(lambda m: f"{m.group(1)}# parity import: dropped, an object's repr is not Python: "
                               f"{m.group(0).strip()}", text)
    return source, dropped


def _script_facts(text: str):
    """The save dir and the command (run, minify, ...) the script's run_repro call names."""
    save_dir = None
    m = _SAVE_DIR.search(text)
    if m:
        save_dir = ast.literal_eval(m.group(1))
    m = _COMMAND.search(text)
    return save_dir, (m.group(1) if m else None)


def _reader(save_dir: Optional[str], device: Optional[str]):
    """PyTorch's InputReader, with each storage moved to `device` when one is asked for, counting
    the storages it had to generate."""
    from torch._dynamo.debug_utils import InputReader
    want = device

    class Reader(InputReader):
        generated = 0

        def storage(self, storage_hash, nbytes, *, device=None, dtype_hint=None):
            stored = (save_dir is not None and storage_hash is not None
                      and os.path.exists(os.path.join(save_dir, "storages", storage_hash)))
            if not stored:
                Reader.generated += 1
            st = super().storage(storage_hash, nbytes, device=want or device, dtype_hint=dtype_hint)
            if want is not None and st.device != torch.device(want):
                st = st.cpu() if torch.device(want).type == "cpu" else st.to(device=torch.device(want))
            return st

    return Reader(save_dir)


def import_script(script: str, out_dir: str, *, save_dir: Optional[str] = None, device: Optional[str] = None,
                  name: Optional[str] = None) -> str:
    """Runs `script` as a module, reads its inputs and captures its `Repro` module into `out_dir`.
    CaptureError (bad input, exit 2) names the script when it is not such a repro script."""
    try:
        text = open(script).read()
    except OSError as e:
        raise CaptureError(f"{script}: {e.strerror}") from None
    if "def load_args" not in text or "class Repro" not in text:
        raise CaptureError(f"{script}: defines no `class Repro` and `def load_args`: not an after_aot repro.py, "
                           "minifier_launcher.py or fx_graph_runnable.py")
    recorded_dir, command = _script_facts(text)
    if save_dir is None and recorded_dir:
        save_dir = recorded_dir if os.path.isabs(recorded_dir) else os.path.join(os.path.dirname(os.path.abspath(script)), recorded_dir)
    if save_dir is not None and not os.path.isdir(save_dir):
        print(f"parity import: the save dir {save_dir} is not there: every input is random data", file=sys.stderr)
        save_dir = None
    source, dropped = _runnable(text)
    for setting in dropped:
        print(f"parity import: warning: {script}: {setting} is set to an object's repr, which is not Python "
              "(after_aot writes it so); the setting is dropped", file=sys.stderr)
    ns = {"__name__": "parity_imported_repro", "__file__": os.path.abspath(script), "__builtins__": __builtins__}
    exec(compile(source, script, "exec"), ns)  # as runpy.run_path runs it, from the source made runnable
    mod = ns.get("mod")
    if not isinstance(mod, torch.nn.Module):
        mod = ns["Repro"]()
    reader = _reader(save_dir, device)
    ns["load_args"](reader)
    args = tuple(reader.args)
    if device is not None:
        mod = mod.to(device)
    facts = {"script": os.path.abspath(script), "command": command, "save_dir": save_dir,
             "generated_storages": type(reader).generated, "dropped_settings": dropped}
    with torch.no_grad():
        capture(mod, args, out_dir, mode="eval", name=name or os.path.splitext(os.path.basename(script))[0],
                extra_manifest={"backend": {"name": "inductor", "options": _inductor_settings(text)},
                                "imported_from": facts})
    return out_dir


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m parity_capture.import_repro")
    p.add_argument("script")
    p.add_argument("--out", required=True)
    p.add_argument("--save-dir", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--name", default=None)
    a = p.parse_args(argv)
    try:
        import_script(a.script, a.out, save_dir=a.save_dir, device=a.device, name=a.name)
    except CaptureError as e:
        print(f"parity import: error: {e}", file=sys.stderr)
        return 2
    return 0  # `parity import` names the dir on its stdout


if __name__ == "__main__":
    from .ending import end
    end(main())
