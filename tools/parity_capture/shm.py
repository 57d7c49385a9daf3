"""The worker's side of host-op shared memory (runtime/shm.h, docs/worker.md): parity writes a
call's tensors into a segment it owns and names it in the request ({"path", "size"}) with each
tensor's dtype, shape and byte offset; the worker views them there without a copy, and writes
the results into a segment of its own, named in the answer the same way. Segments are files
parity-shm-<owner pid>-<n> in /dev/shm (the temp dir where there is none)."""
from __future__ import annotations

import atexit
import itertools
import mmap
import os
import tempfile
from typing import Any, Dict, List, Sequence, Tuple

import torch

PREFIX = "parity-shm-"
ALIGN = 64


def shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class _Mapped:
    """Mappings of parity's argument segments, by path (a worker serves one parity process at a
    time; a handful of paths at most, as a segment is replaced only when it grows)."""

    def __init__(self) -> None:
        self.maps: Dict[str, Tuple[int, mmap.mmap]] = {}

    def get(self, path: str, size: int) -> mmap.mmap:
        if not os.path.basename(path).startswith(PREFIX):
            raise ValueError(f"shared memory: {path!r} is not a parity segment")
        have = self.maps.get(path)
        if have is None or have[0] < size:
            if len(self.maps) >= 4:  # drop the oldest; views still alive keep it mapped
                self.maps.pop(next(iter(self.maps)))
            with open(path, "r+b") as f:
                self.maps[path] = (size, mmap.mmap(f.fileno(), size))
        return self.maps[path][1]


class _Results:
    """The worker's own segment for results, grown (replaced) when a call needs more."""

    def __init__(self) -> None:
        self.serial = itertools.count()
        self.path = ""
        self.size = 0
        self.map = None
        atexit.register(self._remove)

    def _remove(self) -> None:
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def ensure(self, size: int) -> mmap.mmap:
        if self.map is None or self.size < size:
            self._remove()
            size = max(_aligned(size), 2 * self.size, 1 << 16)
            path = os.path.join(shm_dir(), f"{PREFIX}{os.getpid()}-{next(self.serial)}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                self.map = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            self.path, self.size = path, size
        return self.map


_args = _Mapped()
_results = _Results()
_DTYPES: Dict[str, torch.dtype] = {}
_NAMES: Dict[torch.dtype, str] = {}
# Views into segments by (path, offset, dtype, shape): a host op called in a loop finds its
# tensors at the same places every call, and a view costs more than the op's own dispatch.
_VIEWS: Dict[Tuple[str, int, str, Tuple[int, ...]], torch.Tensor] = {}


def _dtype(name: str) -> torch.dtype:
    d = _DTYPES.get(name)
    if d is None:
        d = _DTYPES[name] = getattr(torch, name)
        if not isinstance(d, torch.dtype):
            raise ValueError(f"shared memory: unknown dtype {name!r}")
    return d


def _name(dtype: torch.dtype) -> str:
    n = _NAMES.get(dtype)
    if n is None:
        n = _NAMES[dtype] = str(dtype).removeprefix("torch.")
    return n


def _view(buf, path: str, dtype_name: str, shape: Sequence[int], offset: int) -> torch.Tensor:
    key = (path, offset, dtype_name, tuple(shape))
    v = _VIEWS.get(key)
    if v is None:
        n = 1
        for d in shape:
            n *= d
        dtype = _dtype(dtype_name)
        if n == 0:
            v = torch.empty(tuple(shape), dtype=dtype)
        else:
            v = torch.frombuffer(buf, dtype=dtype, count=n, offset=offset).view(tuple(shape))
        if len(_VIEWS) >= 1024:
            _VIEWS.clear()
        _VIEWS[key] = v
    return v


def read_arguments(req: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The request's tensors, keyed "t0", "t1", ... in order, viewed in parity's segment."""
    specs = req.get("tensors") or []
    if not specs:
        return {}
    path = req["shm"]["path"]
    buf = _args.get(path, int(req["shm"]["size"]))
    return {f"t{k}": _view(buf, path, d["dtype"], d["shape"], int(d["offset"])) for k, d in enumerate(specs)}


class Places:
    """Where a plan's results went last time: the worker's segment then, and each result's dtype,
    shape and view in it (None when empty). A repeat whose results have the same dtypes and
    shapes, while the segment is still the same, is written to the same places and answered
    {"same": true}: parity reads them where it read them last time (host_ops/wire.cpp)."""

    __slots__ = ("path", "entries")

    def __init__(self, path: str, entries) -> None:
        self.path, self.entries = path, entries

    def rewrite(self, tensors: List[torch.Tensor]) -> bool:
        """Copies `tensors` to these places when they fit them; False (nothing written) when not."""
        entries = self.entries
        if self.path != _results.path or len(tensors) != len(entries):
            return False
        for t, (dtype, shape, _) in zip(tensors, entries):
            if t.dtype != dtype or t.shape != shape:
                return False
        for t, (_, _, view) in zip(tensors, entries):
            if view is not None:
                view.copy_(t.detach())
        return True


def write_results(tensors: List[torch.Tensor], last: "Places | None" = None) -> Tuple[Dict[str, Any], Places]:
    """Writes `tensors` (on any device) into the worker's segment: the answer's {"shm", "outputs"},
    or {"same": true} when `last` (the places of the same plan's previous results) still fits;
    and the places used."""
    if last is not None and last.rewrite(tensors):
        return {"same": True}, last
    offsets, total = [], 0
    for t in tensors:
        offsets.append(total)
        total += _aligned(t.numel() * t.element_size())
    buf = _results.ensure(total)
    outputs, entries = [], []
    for t, off in zip(tensors, offsets):
        name = _name(t.dtype)
        view = _view(buf, _results.path, name, t.shape, off) if t.numel() else None
        if view is not None:
            view.copy_(t.detach())
        outputs.append({"dtype": name, "shape": list(t.shape), "offset": off})
        entries.append((t.dtype, t.shape, view))
    return {"shm": {"path": _results.path, "size": _results.size}, "outputs": outputs}, Places(_results.path, entries)
