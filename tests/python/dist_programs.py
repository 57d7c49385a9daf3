"""Distributed programs the suite captures (test_distributed.py): each rank a process of a gloo
group on the CPU, started by `python dist_programs.py KIND[,KIND...] WORLD BASE`, each program
compiled with parity's dump_backend writing the multi-rank dir BASE/KIND (several kinds run one
after another in the same rank processes: one start-up of torch and of the group). Prints each rank's result (the program's
own run, which the capture leaves unchanged). DIST_DEVICE=cuda: an NCCL group, a GPU per rank
(scripts/gpu_distributed.sh). The CPU's ranks are forked from this process, the GPU's spawned."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp

from parity_capture import dump_backend


class Collectives(torch.nn.Module):
    """Every functional collective parity computes, on the values a rank's linear layer makes."""

    def __init__(self, world):
        super().__init__()
        self.world = world
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        group = dist.group.WORLD
        y = torch.relu(self.lin(x))
        s = funcol.all_reduce(y, "sum", group)
        a = funcol.all_reduce(y, "avg", group)
        m = funcol.all_reduce(y, "max", group)
        g = funcol.all_gather_tensor(s, 0, group)                 # [4 * world, 16]
        r = funcol.reduce_scatter_tensor(g, "sum", 0, group)      # [4, 16]
        t = funcol.all_to_all_single(g, None, None, group)        # equal splits
        b = funcol.broadcast(y, 1, group)                         # group rank 1's values
        # DTensor's Shard(0) -> Shard(1) redistribution: [4 * world * world, 16 / world]
        sd = torch.ops._dtensor.shard_dim_alltoall(g, 0, 1, group.group_name)
        return s + a * m + r, t.sum(0), b + sd.reshape(4, -1).sum(1, keepdim=True)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 512)
        self.c = torch.nn.Linear(512, 512)
        self.b = torch.nn.Linear(512, 4)

    def forward(self, x):
        return self.b(torch.relu(self.c(torch.relu(self.a(x)))))


DEVICE = os.environ.get("DIST_DEVICE", "cpu")


def device():
    return torch.device(f"cuda:{torch.cuda.current_device()}") if DEVICE == "cuda" else torch.device("cpu")


def run_collectives(rank, world, out):
    torch.manual_seed(0)
    model = Collectives(world).to(device())
    x = torch.randn(4, 16, device=device()) + rank
    with torch.no_grad():
        return torch.compile(model, backend=dump_backend(out, model_name="collectives"))(x)


def run_ddp(rank, world, out):
    """Plain DDP: dynamo splits the graph at the buckets; the allreduce is in DDP's C++ reducer."""
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Net().to(device()), bucket_cap_mb=1)
    compiled = torch.compile(model, backend=dump_backend(out, model_name="ddp"))
    x = torch.randn(8, 16, device=device()) + rank
    loss = compiled(x).square().mean()
    loss.backward()
    return loss


def run_ddp_python_reducer(rank, world, out):
    """DDP with the python reducer under compiled autograd (set before DDP is built): a compiled
    train step whose backward is one graph, the reducer's division and all_reduce of each
    accumulated gradient inside it."""
    with torch._dynamo.config.patch(optimize_ddp="python_reducer", compiled_autograd=True):
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(Net().to(device()))

        @torch.compile(backend=dump_backend(out, model_name="ddp_python_reducer"))
        def step(x):
            loss = model(x).square().mean()
            loss.backward()
            return loss

        loss = step(torch.randn(8, 16, device=device()) + rank)
    return loss


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return x + torch.relu(self.lin(self.norm(x)))


def run_fsdp2(rank, world, out, mixed_precision=False):
    """FSDP2 as torchtitan applies it: fully_shard on each block, each block compiled, then the root.
    mixed_precision (kind fsdp2_mp): parameters all-gathered in bfloat16, gradients reduced in float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).to(device())
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed_precision else None
    shard = (lambda m: fully_shard(m, mp_policy=policy)) if policy else fully_shard
    backend = dump_backend(out, model_name="fsdp2_mp" if mixed_precision else "fsdp2")
    for block in model:
        shard(block)
        block.compile(backend=backend)
    shard(model)
    y = model(torch.randn(4, 16, device=device()) + rank)
    y.float().sum().backward()
    return y


def run_fsdp2_whole(rank, world, out):
    """FSDP2 on the whole model: fully_shard on the root alone, the whole model compiled."""
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).to(device())
    fully_shard(model)
    compiled = torch.compile(model, backend=dump_backend(out, model_name="fsdp2_whole"))
    y = compiled(torch.randn(4, 16, device=device()) + rank)
    y.sum().backward()
    return y


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def run_tp(rank, world, out, train=True):
    """Tensor parallel: the MLP's up projection column-wise, its down projection row-wise (DTensor
    parameters; the row-wise output all-reduced)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    torch.manual_seed(0)
    mesh = init_device_mesh(device().type, (world,))
    model = parallelize_module(MLP().to(device()), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    compiled = torch.compile(model, backend=dump_backend(out, model_name="tp"))
    x = torch.randn(4, 16, device=device())
    if not train:
        with torch.no_grad():
            return compiled(x)
    y = compiled(x)
    y.sum().backward()
    return y


def run_fsdp2_tp(rank, world, out):
    """2-D parallelism as torchtitan composes it: a (world / 2, 2) mesh, each MLP tensor-parallel
    over "tp" and fully_shard over "dp", then the root; the whole model compiled, trained. The
    ranks call different groups (each its own tp and dp pair): minify across ranks renames them
    (distributed/groups.h). Needs an even world of 4 or more."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh(device().type, (world // 2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(MLP(), MLP()).to(device())
    for block in model:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    compiled = torch.compile(model, backend=dump_backend(out, model_name="fsdp2_tp"))
    torch.manual_seed(100 + mesh.get_local_rank("dp"))  # a batch per dp rank, the same on its tp pair
    y = compiled(torch.randn(4, 16, device=device()))
    y.square().mean().backward()
    return y


def run_loss_parallel(rank, world, out):
    """A column-wise head whose logits stay sharded over the vocabulary, its cross-entropy under
    loss_parallel() (the loss's max, sum and target pick as collectives), compiled, trained."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module
    mesh = init_device_mesh(device().type, (world,))
    torch.manual_seed(0)
    head = parallelize_module(torch.nn.Linear(16, 32).to(device()), mesh,
                              ColwiseParallel(output_layouts=Shard(-1), use_local_output=False))
    x, target = torch.randn(4, 16, device=device()), torch.randint(0, 32, (4,), device=device())

    def step(x, target):
        return torch.nn.functional.cross_entropy(head(x), target)
    with loss_parallel():
        loss = torch.compile(step, backend=dump_backend(out, model_name="loss_parallel"))(x, target)
        loss.backward()
    return loss.full_tensor() if hasattr(loss, "full_tensor") else loss


class SequenceParallel(torch.nn.Module):
    """A hand-written sequence-parallel block: each rank holds a slice of the sequence, gathered
    before the MLP and reduce-scattered after it by the functional collectives' autograd forms
    (their backward: a reduce_scatter and an all_gather)."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        group = dist.group.WORLD
        h = funcol.all_gather_tensor_autograd(self.norm(x), 0, group)
        h = self.down(torch.nn.functional.silu(self.up(h)))
        return x + funcol.reduce_scatter_tensor_autograd(h, "sum", 0, group)


def run_sp(rank, world, out):
    torch.manual_seed(0)
    model = SequenceParallel().to(device())
    compiled = torch.compile(model, backend=dump_backend(out, model_name="sp"))
    torch.manual_seed(rank)  # each rank's own slice of the sequence
    y = compiled(torch.randn(4, 16, device=device()))
    y.pow(2).sum().backward()
    return y


class TitanBlock(torch.nn.Module):
    """A pre-norm attention and SwiGLU block as torchtitan parallelizes it (run_tp_sp)."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.attention_norm = torch.nn.RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.ffn_norm = torch.nn.RMSNorm(d)
        self.w1, self.w3 = torch.nn.Linear(d, 2 * d, bias=False), torch.nn.Linear(d, 2 * d, bias=False)
        self.w2 = torch.nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        y = self.attention_norm(x)
        q, k, v = (w(y).view(b, s, -1, d // self.heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        x = x + self.wo(o)
        z = self.ffn_norm(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(z)) * self.w3(z))


def run_tp_sp(rank, world, out, gather_in_hooks=True):
    """Tensor and sequence parallel as torchtitan plans a block: the norms SequenceParallel, q/k/v
    and the SwiGLU's up projections column-wise, taking the norms' sequence-sharded output
    (input_layouts=Shard(1): each gathers it), the output and down projections row-wise back to
    the sequence shard; the input a sequence-sharded DTensor; trained. One graph.
    gather_in_hooks=False (kind tp_sp_breaks): the column-wise layers keep their default input
    layout (Replicate), so the sharded input reaches the view ops and DTensor's reshapes break the
    block into nine graphs, the DeviceMesh handed from one to the next, some compiled again at
    another width (symbolic), some making a DTensor of a plain tensor (torch 2.13; torch 2.11's
    dynamo refuses the program itself)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module
    mesh = init_device_mesh(device().type, (world,))
    torch.manual_seed(0)
    block = TitanBlock().to(device())
    rowwise = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    colwise = ColwiseParallel(input_layouts=Shard(1)) if gather_in_hooks else ColwiseParallel()
    parallelize_module(block, mesh, {"attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
                                     "wq": colwise, "wk": colwise, "wv": colwise, "wo": rowwise,
                                     "w1": colwise, "w3": colwise, "w2": rowwise})
    torch.manual_seed(1)
    x = torch.randn(2, 4 * world, 32, device=device()).chunk(world, dim=1)[rank].contiguous()
    name = "tp_sp" if gather_in_hooks else "tp_sp_breaks"
    y = torch.compile(block, backend=dump_backend(out, model_name=name))(DTensor.from_local(x, mesh, [Shard(1)]))
    y = y.to_local()
    y.square().mean().backward()
    return y


PROGRAMS = {"collectives": run_collectives, "ddp": run_ddp, "ddp_python_reducer": run_ddp_python_reducer,
            "fsdp2": run_fsdp2, "fsdp2_whole": run_fsdp2_whole, "fsdp2_tp": run_fsdp2_tp,
            "fsdp2_mp": lambda rank, world, out: run_fsdp2(rank, world, out, mixed_precision=True),
            "loss_parallel": run_loss_parallel,
            "tp": run_tp, "tp_sp": run_tp_sp, "sp": run_sp,
            "tp_sp_breaks": lambda rank, world, out: run_tp_sp(rank, world, out, gather_in_hooks=False),
            "tp_eval": lambda rank, world, out: run_tp(rank, world, out, train=False)}


def capture(kinds, world, base):
    """Runs this module's programs `kinds` (comma-separated) on `world` gloo ranks, each into
    base/<kind>, in a process of their own (what the tests call)."""
    import subprocess
    r = subprocess.run([sys.executable, os.path.abspath(__file__), kinds, str(world), str(base)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr


def main(rank, kinds, world, base):
    if DEVICE == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    os.makedirs(base, exist_ok=True)
    dist.init_process_group("nccl" if DEVICE == "cuda" else "gloo", init_method=f"file://{base}/.store", rank=rank,
                            world_size=world)
    try:
        for kind in kinds:
            torch._dynamo.reset()
            result = PROGRAMS[kind](rank, world, os.path.join(base, kind))
            first = result[0] if isinstance(result, tuple) else result
            print(f"{kind} rank {rank}: {first.sum().item():.6f}", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    kinds, world, out = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # A store file an earlier run left (a rank that did not tear its group down) holds that run's
    # keys: NCCL's bootstrap would read the old rank 0's address and be refused.
    if os.path.exists(os.path.join(out, ".store")):
        os.remove(os.path.join(out, ".store"))
    # On the CPU the ranks are forked from this process, torch imported once (spawn would import
    # it in each: 2-3 CPU-s a rank on a 2-core machine); CUDA ranks are spawned, as CUDA requires.
    method = "spawn" if DEVICE == "cuda" else "fork"
    mp.start_processes(main, args=(kinds, world, out), nprocs=world, start_method=method)
