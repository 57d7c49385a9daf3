"""A model calling a user's torch.library.custom_op (with a fake kernel and an autograd formula)
between ATen ops: a host op for parity. Importing this module registers parity_test::scaled_gelu."""
import torch
import torch.nn as nn

from parity_capture import capture


@torch.library.custom_op("parity_test::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * scale


@scaled_gelu.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.scale = inputs[1]


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    with torch.enable_grad():
        xd = x.detach().requires_grad_(True)
        (gx,) = torch.autograd.grad(torch.nn.functional.gelu(xd) * ctx.scale, xd, grad)
    return gx, None


scaled_gelu.register_autograd(_backward, setup_context=_setup)


@torch.library.custom_op("parity_test::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    """An op whose result's shape depends on the data (the positive entries of x)."""
    return x[x > 0].clone()


@positives.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


class CustomOpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(16, 32)
        self.lin2 = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.tanh(self.lin1(x))
        h = scaled_gelu(h, 0.5)
        return torch.sigmoid(self.lin2(h))


def capture_custom(out: str, mode: str = "eval") -> str:
    torch.manual_seed(0)
    model = CustomOpNet()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    loss = (lambda out: out.square().mean()) if mode == "train" else None
    return capture(model, (x,), out, name="custom_op_net", mode=mode, loss_fn=loss)


if __name__ == "__main__":
    import sys
    print(capture_custom(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "eval"))
