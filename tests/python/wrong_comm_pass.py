"""Inductor with a wrong communication pass, as users plug passes in (`parity ... --import
wrong_comm_pass --backend inductor`): at import it sets Inductor's post-grad custom pass to one that
turns every sum all_reduce into an average. Each rank's own computation stays right; only the
collective is wrong, so the failure shows only where the collectives run, and PyTorch's compiler
bisector can name the pass (post_grad_custom_post_pass)."""
import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass

ALL_REDUCE = (torch.ops._c10d_functional.all_reduce.default, torch.ops._c10d_functional.all_reduce_.default)


class WrongComm(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph) -> None:
        for n in graph.nodes:
            if n.op == "call_function" and n.target in ALL_REDUCE and n.args[1] == "sum":
                n.args = (n.args[0], "avg", *n.args[2:])

    def uuid(self) -> str:
        return "parity-test-wrong-comm-pass"


config.post_grad_custom_post_pass = WrongComm()
