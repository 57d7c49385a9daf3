"""A model calling users' torch.library custom ops that write their arguments (mutates_args): a
KV-cache write that also returns a value, and an in-place scale of a view of a buffer that
returns nothing. Functionalization records them as auto_functionalized(_v2); parity records the
clones and the op's own call (tools/parity_capture/functionalized.py). Importing this module
registers parity_test::cache_write and parity_test::scale_."""
import torch
import torch.nn as nn


@torch.library.custom_op("parity_test::cache_write", mutates_args=("cache",))
def cache_write(cache: torch.Tensor, x: torch.Tensor, pos: int) -> torch.Tensor:
    cache[:, pos] = x
    return cache[:, : pos + 1].mean(1)


@cache_write.register_fake
def _(cache, x, pos):
    return cache.new_empty(cache.shape[0], cache.shape[2])


@torch.library.custom_op("parity_test::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, s: float) -> None:
    x.mul_(s)


class CacheNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.out = nn.Linear(16, 4)
        self.register_buffer("cache", torch.randn(2, 6, 16))
        self.register_buffer("state", torch.ones(4, 16))

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        m = torch.ops.parity_test.cache_write(self.cache, h, 3)
        torch.ops.parity_test.scale_(self.state[1:3], 0.5)  # a view of a buffer, written in place
        return self.out(m + self.cache[:, 2]) + self.state.sum(0)[:4]
