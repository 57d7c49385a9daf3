"""A backend plugin as users write them (`parity ... --import wrong_post_grad_pass`): at import it
registers a post-grad pass that is wrong (it turns every relu into x + 1), as a vendor's pass
with a bug would."""
import torch
from torch._inductor.custom_graph_pass import CustomGraphPass


class WrongPass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph) -> None:
        for n in graph.nodes:
            if n.op == "call_function" and n.target is torch.ops.aten.relu.default:
                n.target = torch.ops.aten.add.Tensor
                n.args = (n.args[0], 1.0)

    def uuid(self):
        return "parity-test-wrong-relu-pass"


torch._inductor.config.post_grad_custom_post_pass = WrongPass()
