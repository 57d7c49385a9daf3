"""A deep chain of small ops (300+ ATen nodes) with one tanh and one sigmoid in the middle:
the minifier tests inject faults into those single ops."""
import torch


class Deep(torch.nn.Module):
    def __init__(self, blocks: int = 60, width: int = 16):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(blocks, width, generator=g) * 0.1 + 1.0)
        self.blocks = blocks

    def forward(self, x):
        for i in range(self.blocks):
            x = x + 0.1 * torch.sin(x * self.w[i])
            if i == self.blocks // 2:
                x = torch.tanh(x) + x
            if i == self.blocks // 2 + 5:
                x = torch.sigmoid(x) * x
        return x.sum(dim=-1), x


def capture_deep(out_dir: str) -> str:
    from parity_capture import capture
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    capture(Deep(), (x,), out_dir, name="deep")
    return out_dir
