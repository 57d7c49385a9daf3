"""A transformer-block model whose only relu is late in the graph (the head's MLP, after two
attention + GELU-MLP blocks), for the minifier benchmark and tests: with Inductor's relu bug
knob the culprit sits near the end, where a bisection-only minifier spends the most runs."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class BlockNet(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4, blocks: int = 2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(blocks))
        self.head1, self.head2 = nn.Linear(d, d), nn.Linear(d, 8)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head2(torch.relu(self.head1(x)))


def build(seed: int = 0):
    """(model, inputs), seeded."""
    torch.manual_seed(seed)
    return BlockNet(), (torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(seed + 1)),)


def capture_block(out_dir: str) -> str:
    from parity_capture import capture
    model, inputs = build()
    capture(model, inputs, out_dir, name="blocknet")
    return out_dir
