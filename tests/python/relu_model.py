"""A small net with one relu among other ops, for PyTorch's inductor minifier-testing knob
(cpp.inject_relu_bug_TESTING_ONLY) and the minifier benchmark."""
import torch

# The knob as a verify or minify command line gives it: Inductor with its relu lowered wrongly.
RELU_KNOB = ["--backend", "inductor", "--backend-option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy"]


class ReluNet(torch.nn.Module):
    def __init__(self, blocks: int = 4, width: int = 32):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.lins = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(blocks))
        for lin in self.lins:
            with torch.no_grad():
                lin.weight.copy_(torch.randn(width, width, generator=g) / width ** 0.5)
        self.relu_at = blocks // 2

    def forward(self, x):
        for i, lin in enumerate(self.lins):
            x = lin(x)
            x = torch.relu(x) if i == self.relu_at else torch.nn.functional.gelu(x) * torch.sigmoid(x)
            x = x + 0.1 * torch.tanh(x)
        return x


def capture_relu(out_dir: str, blocks: int = 4, batch: int = 8, width: int = 32, mode: str = "eval") -> str:
    """mode "train": the graph returns (loss, out) with loss = mean(out ** 2)."""
    from parity_capture import capture
    torch.manual_seed(0)
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1))
    loss = (lambda out: out.square().mean()) if mode == "train" else None
    capture(ReluNet(blocks, width), (x,), out_dir, name="relunet", mode=mode, loss_fn=loss)
    return out_dir
