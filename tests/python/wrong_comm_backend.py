"""A backend with a wrong communication pass, as users register backends (`parity ...
--import wrong_comm_backend --backend torch_compile:wrong_comm`): at import it registers the
dynamo backend `wrong_comm`, which runs the graph it is given after turning every sum all_reduce
into an average. Each rank's own computation stays right; only the collective is wrong, so the
failure shows only where the collectives run."""
import torch
from torch._dynamo import register_backend

ALL_REDUCE = (torch.ops._c10d_functional.all_reduce.default, torch.ops._c10d_functional.all_reduce_.default)


@register_backend
def wrong_comm(gm: torch.fx.GraphModule, example_inputs):
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in ALL_REDUCE and n.args[1] == "sum":
            n.args = (n.args[0], "avg", *n.args[2:])
    gm.recompile()
    return gm.forward
