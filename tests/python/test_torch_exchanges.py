"""The torch backend's exchanges and rooted calls run natively (tpcomm's statistics count them,
nothing is delegated): all_to_all_single even and uneven (blocks of 0 included) in float32,
bfloat16 and int64, all_to_all of lists, gather, scatter and reduce with every root, async_op;
then a mixture-of-experts layer (router, the int64 count exchange, token dispatch with
all_to_all_single, experts, combine) against the same layer computed whole in one process.
Three ranks under torchrun; references computed here from (sender, receiver, element)."""

import pytest

from conftest import run_ranks

torch = pytest.importorskip("torch")
needs_torch2 = pytest.mark.skipif(
    int(torch.__version__.split(".")[0]) < 2,
    reason=f"torch {torch.__version__}: the backend needs torch 2.x (docs/torch-backend.md)",
)

EXCHANGES = """
import torch.distributed as dist
import tpcomm.torch
dist.init_process_group("tpcomm")
r, w = dist.get_rank(), dist.get_world_size()
backend = dist.group.WORLD._get_backend(torch.device("cpu"))

def block(src, dst, n, dtype):
    # what rank src sends rank dst: distinct per (src, dst, element), exact in every dtype
    return (torch.arange(n) % 61 + 100 * src + 10 * dst).to(dtype)

for dtype in (torch.float32, torch.bfloat16, torch.int64):
    # even: 4 elements per peer
    x = torch.cat([block(r, p, 4, dtype) for p in range(w)])
    y = torch.empty_like(x)
    work = dist.all_to_all_single(y, x, async_op=True)
    work.wait()
    assert torch.equal(y, torch.cat([block(p, r, 4, dtype) for p in range(w)])), (dtype, y)
    # uneven, rows of 3, some blocks empty
    sends = [(r + 2 * p) % 3 * 2 for p in range(w)]
    takes = [(p + 2 * r) % 3 * 2 for p in range(w)]
    x = torch.cat([block(r, p, sends[p] * 3, dtype).view(-1, 3) for p in range(w)])
    y = torch.empty(sum(takes), 3, dtype=dtype)
    dist.all_to_all_single(y, x, takes, sends)
    want = torch.cat([block(p, r, takes[p] * 3, dtype).view(-1, 3) for p in range(w)])
    assert torch.equal(y, want), (dtype, y, want)
    # lists of any sizes
    outs = [torch.empty(p + r + 1, dtype=dtype) for p in range(w)]
    dist.all_to_all(outs, [block(r, p, r + p + 1, dtype) for p in range(w)])
    assert all(torch.equal(outs[p], block(p, r, p + r + 1, dtype)) for p in range(w)), outs
    for root in range(w):
        mine = block(r, root, 5, dtype)
        got = [torch.empty(5, dtype=dtype) for _ in range(w)] if r == root else None
        dist.gather(mine, got, dst=root)
        if r == root:
            assert all(torch.equal(got[p], block(p, root, 5, dtype)) for p in range(w)), got
        part = torch.empty(6, dtype=dtype)
        parts = [block(root, p, 6, dtype) for p in range(w)] if r == root else None
        dist.scatter(part, parts, src=root)
        assert torch.equal(part, block(root, r, 6, dtype)), part
        t = block(r, 0, 7, dtype)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if r == root:
            assert torch.equal(t, block(w - 1, 0, 7, dtype)), t
        t = block(r, 0, 7, dtype)
        dist.reduce(t, dst=root)
        if r == root:
            want = sum(block(p, 0, 7, torch.int64) for p in range(w)).to(dtype)
            assert torch.equal(t, want), (t, want)

# A mixture-of-experts layer: 6 experts, 2 per rank, top-2 routing of 10 tokens of hidden 16 per
# rank. The reference is the whole layer over every rank's tokens in this one process.
H, E, T, K = 16, 6, 10, 2
g = torch.Generator().manual_seed(0)
router = torch.randn(H, E, generator=g)
experts = [torch.randn(H, H, generator=g) / 4 for _ in range(E)]
tokens = [torch.randn(T, H, generator=g) for _ in range(w)]

def moe_whole(x):
    weights, chosen = torch.topk(torch.softmax(x @ router, dim=-1), K)
    out = torch.zeros_like(x)
    for k in range(K):
        for e in range(E):
            hit = chosen[:, k] == e
            out[hit] += weights[hit, k, None] * torch.tanh(x[hit] @ experts[e])
    return out

x = tokens[r]
weights, chosen = torch.topk(torch.softmax(x @ router, dim=-1), K)
flat = chosen.reshape(-1)  # (T * K) expert ids
owner = flat // (E // w)
order = torch.argsort(owner, stable=True)
sends = torch.bincount(owner, minlength=w)
takes = torch.empty_like(sends)
dist.all_to_all_single(takes, sends)  # the int64 count exchange
send_rows = x.repeat_interleave(K, dim=0)[order]
send_ids = flat[order]
got_rows = torch.empty(int(takes.sum()), H)
got_ids = torch.empty(int(takes.sum()), dtype=torch.int64)
dist.all_to_all_single(got_rows, send_rows, takes.tolist(), sends.tolist())
dist.all_to_all_single(got_ids, send_ids, takes.tolist(), sends.tolist())
done = torch.empty_like(got_rows)
for e in range(E):
    hit = got_ids == e
    done[hit] = torch.tanh(got_rows[hit] @ experts[e])
back = torch.empty_like(send_rows)
dist.all_to_all_single(back, done, sends.tolist(), takes.tolist())
combined = torch.empty_like(back)
combined[order] = back
out = (combined.view(T, K, H) * weights[..., None]).sum(dim=1)
diff = (out - moe_whole(x)).abs().max().item()
assert diff < 1e-5, diff

stats = tpcomm.torch.communicator().stats()
assert backend.delegated == {}, backend.delegated
for name in ("all_to_all", "all_to_allv", "gather", "scatter", "reduce"):
    assert stats[name]["calls"] > 0 and set(stats[name]["routes"]) == {"shm/one_shot"}, stats[name]
dist.destroy_process_group()
ok(f"exchanges moe max diff {diff:.1e}")
"""


@needs_torch2
def test_exchanges_rooted_calls_and_a_moe_layer_run_natively(tmp_path):
    run_ranks(tmp_path, EXCHANGES, n=3, launcher="torchrun").expect_ok(3)


MESSAGES = """
import torch.distributed as dist
import tpcomm.torch
dist.init_process_group("tpcomm")
r, w = dist.get_rank(), dist.get_world_size()
other = 1 - r
backend = dist.group.WORLD._get_backend(torch.device("cpu"))

def payload(src, n, salt):
    return (torch.arange(n, dtype=torch.float32) * 3 + 1000 * src + salt) % 65521

# batch_isend_irecv with both ranks sending first, at every size (past shm's mailbox ring)
for i, n in enumerate([0, 1, 4096, 70001, 1 << 20]):
    got = torch.full((n,), -1.0)
    ops = [dist.P2POp(dist.isend, payload(r, n, i), other),
           dist.P2POp(dist.irecv, got, other)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert torch.equal(got, payload(other, n, i)), (n, got[:4])

# a receive without a source learns it; tags; isend / irecv
if r == 0:
    dist.send(payload(0, 10, 7), 1, tag=3)
    work = dist.isend(torch.arange(4, dtype=torch.int64), 1)
    work.wait()
else:
    got = torch.empty(10)
    assert dist.recv(got, tag=3) == 0
    assert torch.equal(got, payload(0, 10, 7)), got
    ints = torch.empty(4, dtype=torch.int64)
    dist.irecv(ints, 0).wait()
    assert torch.equal(ints, torch.arange(4)), ints

# a two-stage pipeline: stage 0 runs the first layer and sends activations, stage 1 the second;
# the gradient comes back. Against both layers in this one process.
g = torch.Generator().manual_seed(1)
w1, w2 = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
batches = [torch.randn(5, 8, generator=g) for _ in range(3)]
for b in batches:
    whole = torch.tanh(b @ w1) @ w2
    if r == 0:
        act = torch.tanh(b @ w1)
        dist.send(act, 1)
        grad = torch.empty_like(act)
        dist.recv(grad, 1)
        assert torch.allclose(grad, torch.ones(5, 4) @ w2.T, atol=1e-6), grad
    else:
        act = torch.empty(5, 16)
        dist.recv(act, 0)
        out = act @ w2
        assert torch.allclose(out, whole, atol=1e-5), (out - whole).abs().max()
        dist.send(torch.ones(5, 4) @ w2.T, 0)

# object collectives over the native calls
objs = [{"rank": r, "text": "x" * (r + 3)}] if r == 0 else [None]
if r == 0:
    dist.send_object_list(objs, 1)
else:
    dist.recv_object_list(objs, src=0)
    assert objs == [{"rank": 0, "text": "xxx"}], objs
gathered = [None, None] if r == 0 else None
dist.gather_object(("g", r), gathered, dst=0)
if r == 0:
    assert gathered == [("g", 0), ("g", 1)], gathered
out = [None]
dist.scatter_object_list(out, [("s", 0), ("s", 1)] if r == 1 else None, src=1)
assert out == [("s", r)], out

# float64: no native path, the group's gloo on both sides
d = torch.full((3,), 0.25 + r, dtype=torch.float64)
if r == 0:
    dist.send(d, 1)
else:
    dist.recv(d, 0)
    assert torch.equal(d, torch.full((3,), 0.25, dtype=torch.float64)), d
assert backend.delegated == ({"send": 1} if r == 0 else {"recv": 1}), backend.delegated
stats = tpcomm.torch.communicator().stats()
assert stats["send"]["calls"] >= 5 and set(stats["send"]["routes"]) == {"shm/one_shot"}, stats
dist.destroy_process_group()
ok("messages")
"""


@needs_torch2
def test_batch_isend_irecv_any_source_and_a_pipeline_run_natively(tmp_path):
    run_ranks(tmp_path, MESSAGES, n=2, launcher="torchrun").expect_ok(2)
