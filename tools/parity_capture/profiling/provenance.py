"""Which graph nodes each kernel computes: Inductor's provenance tracking for a forward graph, and
for a train step's backward the post-grad graphs as Inductor lowers them (autograd sequence
numbers link a backward node to the forward nodes it differentiates)."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Optional

import torch

from .categories import _GRAPH_PREFIX, op_short_name


class Provenance:
    """Inductor's provenance tracking (config.trace.provenance_tracking_level): which post-grad
    nodes each kernel came from and which of the input graph's nodes each post-grad node came
    from, per phase ("forward": an inference or forward graph, "backward": AOTAutograd's
    backward graph), collected from every graph compiled while it is active.

    Inductor maps a forward graph's post-grad nodes to the input graph's nodes itself. A backward
    graph has no such map (its nodes come from autograd, not from the input graph), and torch
    2.13 does not report a lazily compiled backward's kernels at all; here a backward graph's
    node goes to the forward nodes of the same autograd op (the sequence number autograd gives
    both, `seq_nr`) and from there to the input graph's nodes, and a forward node the partitioner
    recomputes in the backward keeps its forward mapping."""

    def __init__(self):
        self.kernel_to_post: Dict[str, Dict[str, List[str]]] = {"forward": {}, "backward": {}}
        self.post_to_pre: Dict[str, List[str]] = {}  # forward post-grad node -> input graph's nodes
        self.seq_to_post: Dict[int, List[str]] = {}  # forward: autograd seq_nr -> post-grad nodes
        self.backward_nodes: Dict[str, Dict[str, Any]] = {}  # backward post-grad node -> seq_nr, recomputed
        self.answered = False
        self._phase = "forward"  # of the graph being compiled
        self._seen: set = set()  # kernel keys already reported ("name:handle", unique per process)
        self._index: Dict[str, tuple] = {}  # phase -> (mapping size it was built at, op -> extern keys)

    def _graph(self, graph) -> None:
        """A post-grad graph about to be lowered: its phase and its nodes' autograd sequence numbers."""
        nodes = [n for n in graph.nodes if n.op == "call_function"]
        backward = _compiling_backward()
        self._phase = "backward" if backward else "forward"
        for n in nodes:
            seq = n.meta.get("seq_nr")
            if backward:
                self.backward_nodes[n.name] = {"seq": seq, "recomputed": n.meta.get("partitioner_tag") != "is_backward"}
            elif seq is not None:
                self.seq_to_post.setdefault(seq, []).append(n.name)

    def _report(self, info: Dict[str, Any]) -> None:
        self.answered = True
        for k, nodes in (info.get("cppCodeToPost") or {}).items():
            if k in self._seen:  # a backward's report repeats the kernels of earlier backwards
                continue
            self._seen.add(k)
            self.kernel_to_post[self._phase].setdefault(k.rsplit(":", 1)[0], []).extend(nodes)
        if self._phase == "forward":
            for post, pres in (info.get("postToPre") or {}).items():
                self.post_to_pre.setdefault(post, []).extend(pres)

    @contextlib.contextmanager
    def collecting(self):
        try:
            import torch._inductor.debug as dbg
            import torch.fx.traceback as fx_traceback
            original, original_graph = dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json
        except (ImportError, AttributeError):  # a torch without provenance tracking
            yield
            return

        def graph_provenance(graph, *args, **kwargs):
            with contextlib.suppress(Exception):  # never in the compile's way
                self._graph(graph)
            return original_graph(graph, *args, **kwargs)

        def dump(*args, **kwargs):
            # A backward compiled lazily runs outside AOTAutograd's provenance context, where
            # Inductor reports nothing; its kernels are recorded all the same.
            lazy = getattr(dbg, "_pre_grad_graph_id", 0) is None
            if lazy:
                dbg._pre_grad_graph_id = -1
            try:
                info = original(*args, **kwargs)
            finally:
                if lazy:
                    dbg._pre_grad_graph_id = None
            with contextlib.suppress(Exception):
                self._report(info)
            return info

        dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json = dump, graph_provenance
        try:
            yield
        finally:
            dbg.dump_inductor_provenance_info, fx_traceback.get_graph_provenance_json = original, original_graph

    def _externs(self, phase: str) -> Dict[str, List[str]]:
        """Extern and fallback calls' keys by op ("addmm" -> ["extern_kernels.addmm", ...]),
        built once per state of the mapping: lookups run for every profiler event."""
        cache = self._index
        size = len(self.kernel_to_post[phase])
        if cache.get(phase, (None,))[0] != size:
            index: Dict[str, List[str]] = {}
            for k in self.kernel_to_post[phase]:
                if not k.startswith(("cpp_", "triton_")):
                    index.setdefault(op_short_name(k), []).append(k)
            cache[phase] = (size, index)
        return cache[phase][1]

    def lookup(self, row_name: str, phase: str = "forward") -> Optional[str]:
        """The provenance key of a profiler row: a generated kernel by name, an extern call by op."""
        key = _GRAPH_PREFIX.sub("", row_name)
        if key in self.kernel_to_post[phase]:
            return key
        keys = self._externs(phase).get(op_short_name(row_name))
        return keys[0] if keys else None

    def _pre(self, post: str, phase: str) -> List[str]:
        if phase == "forward":
            return self.post_to_pre.get(post, [])
        node = self.backward_nodes.get(post, {})
        forward = self.seq_to_post.get(node.get("seq"), []) if node.get("seq") is not None else []
        if not forward and node.get("recomputed"):
            forward = [post]  # the partitioner keeps a recomputed forward node's name
        return [pre for f in forward for pre in self.post_to_pre.get(f, [])]

    def nodes(self, key: str, phase: str = "forward") -> Dict[str, List[str]]:
        """The post-grad nodes a kernel computes (for an extern call: every call of that op) and
        the input graph's nodes they come from, in order, without repeats."""
        table = self.kernel_to_post[phase]
        keys = [key] if key.startswith(("cpp_", "triton_")) else self._externs(phase).get(op_short_name(key), [key])
        post = list(dict.fromkeys(n for k in keys for n in table.get(k, [])))
        pre = list(dict.fromkeys(n for p in post for n in self._pre(p, phase)))
        return {"post_grad_nodes": post, "nodes": pre}



def _compiling_backward() -> bool:
    """Whether the graph being compiled is AOTAutograd's backward, as the generated module's
    `# AOT ID: ['0_backward']` header says (the tracing context names the graph). Not the
    partitioner's tags: a forward graph holds is_backward nodes too (resnet's batch norms)."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        names = (ctx.aot_graph_name if ctx is not None else None) or []
    except AttributeError:
        return False
    return any(str(n).endswith("_backward") for n in names)
