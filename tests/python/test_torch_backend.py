"""The torch.distributed backend "tpcomm" (import tpcomm.torch): every collective and dtype
against references computed here, the refusals, groups and the mixed form, and torch's own
tensor-parallel API (DTensor's parallelize_module) on backend tpcomm against gloo and against
one process computing the whole block. torch 2.x only: torch 1.13 has no Backend that Python
can subclass, which the last test checks it says."""

import os
import subprocess

import pytest

from conftest import BUILD, PYTHON, run_ranks

torch = pytest.importorskip("torch")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
needs_torch2 = pytest.mark.skipif(
    not TORCH2,
    reason=f"torch {torch.__version__}: the backend needs torch 2.x (a Python-"
    "subclassable torch.distributed Backend); this interpreter runs the 1.13 test below instead",
)

SETUP = """
import torch.distributed as dist
import tpcomm.torch
from tpcomm.torch import TpcommBackend
CALLS = {}
def counted(name):
    real = getattr(TpcommBackend, name)
    def call(self, *args):
        CALLS[name] = CALLS.get(name, 0) + 1
        return real(self, *args)
    setattr(TpcommBackend, name, call)
for name in ("allreduce", "allgather", "all_gather_single", "reduce_scatter_single", "broadcast",
             "scatter", "barrier"):
    counted(name)
"""

COLLECTIVES = (
    SETUP
    + """
dist.init_process_group("tpcomm")
r, w = dist.get_rank(), dist.get_world_size()
n = 37
i = torch.arange(n)
def value(q, dtype):  # rank q's element j: small and exact in every dtype
    return ((i * 7 + q * 5) % 11).to(dtype)
for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64,
              torch.uint8):
    parts = [value(q, torch.float64) for q in range(w)]
    expect = {"sum": sum(parts), "min": torch.stack(parts).min(0).values,
              "max": torch.stack(parts).max(0).values}
    if dtype.is_floating_point:
        expect["avg"] = sum(parts) / w
    for name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG),
                     ("min", dist.ReduceOp.MIN), ("max", dist.ReduceOp.MAX)):
        if name not in expect:
            continue
        t = value(r, dtype)
        work = dist.all_reduce(t, op=op, async_op=(name == "max"))
        if name == "max":  # async_op: wait() completes it, the future holds the tensor
            assert work.wait() is True, name
            assert torch.equal(work.get_future().wait()[0], t), name
        assert torch.equal(t, expect[name].to(dtype)), (dtype, name, t, expect[name])
    outs = [torch.full((n,), 99, dtype=dtype) for _ in range(w)]
    dist.all_gather(outs, value(r, dtype))
    for q in range(w):
        assert torch.equal(outs[q], value(q, dtype)), (dtype, "all_gather", q)
    into = torch.empty(w * n, dtype=dtype)
    dist.all_gather_into_tensor(into, value(r, dtype))
    assert torch.equal(into, torch.cat([value(q, dtype) for q in range(w)])), (dtype, "into")
    big = [((torch.arange(w * n) * 3 + q) % 13).to(dtype) for q in range(w)]
    out = torch.empty(n, dtype=dtype)
    dist.reduce_scatter_tensor(out, big[r])
    assert torch.equal(out, sum(b.double() for b in big)[r * n:(r + 1) * n].to(dtype)), dtype
    for src in range(w):
        b = value(r, dtype)
        dist.broadcast(b, src)
        assert torch.equal(b, value(src, dtype)), (dtype, "broadcast", src)
    dist.barrier()
assert CALLS["allreduce"] == 3 * 4 + 3 * 3 and CALLS["barrier"] == 6, CALLS  # all on tpcomm
dist.destroy_process_group()
ok(f"every collective and dtype, {CALLS}")
"""
)


@needs_torch2
def test_every_collective_and_dtype_matches_the_reference(tmp_path):
    run_ranks(tmp_path, COLLECTIVES, n=3, launcher="torchrun").expect_ok(3)


DELEGATED = (
    SETUP
    + """
dist.init_process_group("tpcomm")
r, w = dist.get_rank(), dist.get_world_size()
backend = dist.group.WORLD._get_backend(torch.device("cpu"))
t = torch.full((4,), float(r + 2))
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
assert torch.equal(t, torch.full((4,), 6.0)), t
d = torch.full((3,), r + 0.5, dtype=torch.float64)
dist.all_reduce(d)
assert torch.equal(d, torch.full((3,), 2.0, dtype=torch.float64)), d
# Uneven all_to_all_single with an empty block: rank r sends p * (r + 1) elements to rank p.
sends = [p * (r + 1) for p in range(w)]
takes = [r * (p + 1) for p in range(w)]
x = torch.cat([torch.full((sends[p],), float(100 * r + p)) for p in range(w)])
y = torch.empty(sum(takes))
dist.all_to_all_single(y, x, takes, sends)
want = torch.cat([torch.full((takes[p],), float(100 * p + r)) for p in range(w)])
assert torch.equal(y, want), (y, want)
if r == 0:
    dist.send(torch.arange(5.0), 1)
else:
    got = torch.empty(5)
    dist.recv(got, 0)
    assert torch.equal(got, torch.arange(5.0)), got
gathered = [torch.empty(2) for _ in range(w)] if r == 0 else None
dist.gather(torch.full((2,), float(r)), gathered, 0)
if r == 0:
    assert all(torch.equal(gathered[p], torch.full((2,), float(p))) for p in range(w)), gathered
t = torch.full((2,), float(r + 1))
dist.reduce(t, 0)
if r == 0:
    assert torch.equal(t, torch.full((2,), 3.0)), t
dist.monitored_barrier()
if r == 0:  # refused by torch's rule for AVG (an integer mean), on the calling rank alone
    refused(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.AVG),
            "avg is for floating-point types", Exception)
t = torch.full((5,), float(r + 1))
dist.all_reduce(t)  # native, and the group in step after the delegated calls
assert torch.equal(t, torch.full((5,), 3.0)), t
want = {"allreduce": 2, "monitored_barrier": 1}
assert backend.delegated == want, backend.delegated
stats = tpcomm.torch.communicator().stats()
names = ("all_reduce", "all_to_allv", "gather", "reduce", "send", "recv")
native = {name: stats[name]["calls"] for name in names}
message = {"send": 1, "recv": 0} if r == 0 else {"send": 0, "recv": 1}
assert native == {"all_reduce": 1, "all_to_allv": 1, "gather": 1, "reduce": 1, **message}, stats
dist.destroy_process_group()
ok("delegated")
"""
)


@needs_torch2
def test_ops_dtypes_and_collectives_tpcomm_lacks_run_on_the_groups_gloo(tmp_path):
    run_ranks(tmp_path, DELEGATED, launcher="torchrun").expect_ok(2)


DETERMINISTIC = """
import torch.distributed as dist
import tpcomm.torch
dist.init_process_group("tpcomm")
r = dist.get_rank()
assert tpcomm.torch.communicator().plan()["deterministic"] is True
t = torch.full((5,), float(r + 1))
dist.all_reduce(t)  # tpcomm's own: served
assert torch.equal(t, torch.full((5,), 3.0)), t
i = torch.full((5,), r + 2, dtype=torch.int64)
dist.all_reduce(i, op=dist.ReduceOp.PRODUCT)  # integers: gloo's, exact in any order
assert torch.equal(i, torch.full((5,), 6, dtype=torch.int64)), i
try:
    dist.all_reduce(torch.ones(5, dtype=torch.float64))  # gloo's sum: refused in the mode
except ValueError as e:
    assert "deterministic mode: allreduce of torch.float64" in str(e), str(e)
else:
    raise AssertionError("a float64 all_reduce was handed to gloo in deterministic mode")
dist.destroy_process_group()
ok("deterministic")
"""


@needs_torch2
def test_deterministic_mode_serves_its_reductions_and_refuses_gloos_float_ones(tmp_path):
    run_ranks(
        tmp_path, DETERMINISTIC, launcher="torchrun", env={"TPCOMM_DETERMINISTIC": "1"}
    ).expect_ok(2)
    # The option torch hands a backend (init_process_group's pg_options) sets it too.
    by_option = DETERMINISTIC.replace(
        'dist.init_process_group("tpcomm")',
        'import types\ndist.init_process_group("tpcomm", '
        "pg_options=types.SimpleNamespace(deterministic=True))",
    )
    run_ranks(tmp_path, by_option, launcher="torchrun").expect_ok(2)


GROUPS = (
    SETUP
    + """
dist.init_process_group("cpu:tpcomm,cuda:gloo")
r, w = dist.get_rank(), dist.get_world_size()
world = dist.group.WORLD
assert isinstance(world._get_backend(torch.device("cpu")), TpcommBackend)
pair = dist.new_group([0, 2], backend="tpcomm")
if r in (0, 2):
    t = torch.full((6,), float(r + 1))
    dist.all_reduce(t, group=pair)
    assert torch.equal(t, torch.full((6,), 4.0)), t
    assert tpcomm.torch.communicator(pair).size == 2
mixed = dist.new_group(list(range(w)), backend="cpu:gloo,cuda:tpcomm")
assert not isinstance(mixed._get_backend(torch.device("cpu")), TpcommBackend)
assert isinstance(mixed._get_backend(torch.device("cuda")), TpcommBackend)
before = dict(CALLS)
t = torch.full((3,), float(r))
dist.all_reduce(t, group=mixed)  # a CPU tensor: gloo's
assert torch.equal(t, torch.full((3,), 3.0)) and CALLS == before, (t, CALLS, before)
t = torch.full((3,), float(r))
dist.all_reduce(t)  # the world: tpcomm's
assert torch.equal(t, torch.full((3,), 3.0)), t
assert CALLS["allreduce"] == before.get("allreduce", 0) + 1, (CALLS, before)
dist.destroy_process_group()
ok("groups")
"""
)


@needs_torch2
def test_new_group_and_the_mixed_form_route_each_device_to_its_backend(tmp_path):
    run_ranks(tmp_path, GROUPS, n=3, launcher="torchrun").expect_ok(3)


TP_BLOCK = (
    SETUP
    + """
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
BACKEND = os.environ["TP_BACKEND"]
dist.init_process_group(BACKEND)
r, w = dist.get_rank(), dist.get_world_size()

class Block(nn.Module):  # pre-norm attention and MLP, heads split across the ranks
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads, self.d = heads, d
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        b, n, _ = x.shape
        y = self.norm1(x)
        dh = self.d // self.heads
        q, k, v = (p(y).view(b, n, -1, dh).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, n, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))

PLAN = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
        "o": RowwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}

def step(module):
    torch.manual_seed(1)
    x = torch.randn(2, 6, 32, requires_grad=True)
    out = module(x)
    (out * torch.arange(32.0)).sum().backward()
    grads = {n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad)
             for n, p in module.named_parameters()}
    return {"output": out.detach(), "input grad": x.grad, **grads}

torch.manual_seed(0)
module = Block()
parallelize_module(module, init_device_mesh("cpu", (w,)), PLAN)
parallel = step(module)
torch.manual_seed(0)
whole = step(Block())  # one process, the whole block: the reference
for name, got in parallel.items():
    assert torch.allclose(got, whole[name], rtol=1e-4, atol=1e-5), (name, (got - whole[name]).abs().max())
if BACKEND == "tpcomm":  # tpcomm served the block's all-reduces, forward and backward
    assert CALLS.get("allreduce", 0) >= 4, CALLS
torch.save(parallel, os.environ["TP_OUT"] + f".{r}")
dist.destroy_process_group()
ok(f"TP block on {w} ranks over {BACKEND}, tpcomm calls {CALLS}")
"""
)


@needs_torch2
@pytest.mark.parametrize("ranks", [2, 4])
def test_parallelize_module_on_tpcomm_matches_gloo_and_the_whole_block(tmp_path, ranks):
    results = {}
    for backend in ("gloo", "tpcomm"):
        out = tmp_path / backend
        run_ranks(
            tmp_path,
            TP_BLOCK,
            n=ranks,
            launcher="torchrun",
            timeout=140,
            env={"TP_BACKEND": backend, "TP_OUT": str(out)},
        ).expect_ok(ranks)
        results[backend] = [torch.load(f"{out}.{r}") for r in range(ranks)]
    for r in range(ranks):
        for name, on_gloo in results["gloo"][r].items():
            on_tpcomm = results["tpcomm"][r][name]
            # Equal up to the order of the ranks' float additions (bit for bit at W = 2).
            scale = max(1.0, on_gloo.abs().max().item())
            assert torch.allclose(on_tpcomm, on_gloo, rtol=1e-5, atol=1e-5 * scale), (
                r,
                name,
                (on_tpcomm - on_gloo).abs().max(),
                scale,
            )


@pytest.mark.skipif(
    TORCH2, reason=f"torch {torch.__version__} has the backend; the tests above run it"
)
def test_import_on_torch_1_says_the_backend_needs_torch_2():
    proc = subprocess.run(
        [PYTHON, "-c", "import tpcomm.torch"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(BUILD / "python")),
    )
    assert proc.returncode != 0 and "the backend needs torch 2.x" in proc.stderr, proc.stderr
