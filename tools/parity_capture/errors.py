"""The errors of capture, below every module that raises them (serialize.py and the lowerings it
calls: functionalized.py, lowering.py)."""


class CaptureError(Exception):
    """A graph uses something the repro format cannot express (dynamic shapes, Python calls)."""
