"""A hundred communicators in one process, beside torch (under the .venv row its own CUDA-enabled
wheel, libtorch_cuda.so mapped): create, every call with rank-dependent data, split, close. The
package met a current torch once before and died with SIGSEGV before its first result."""

import pytest

from conftest import run_ranks

torch = pytest.importorskip("torch")

CYCLES = """
with open("/proc/self/maps") as f:
    maps = f.read()
cuda_wheel = torch.version.cuda is not None
if cuda_wheel:  # torch's CUDA build is loaded, not only installed
    assert "libtorch_cuda.so" in maps, "torch reports CUDA but libtorch_cuda.so is not mapped"
print(f"rank {RANK}: torch {torch.__version__}, CUDA build: {cuda_wheel}", flush=True)
n = 24
for cycle in range(100):
    comm = tpcomm.Communicator.from_env(timeout=30)
    r, w = comm.rank, comm.size
    mine = torch.arange(n, dtype=torch.float32) * (r + 1) + cycle
    expect = sum(torch.arange(n, dtype=torch.float32) * (q + 1) + cycle for q in range(w))
    t = mine.clone()
    assert torch.equal(comm.all_reduce(t), expect), cycle
    assert torch.equal(comm.all_reduce(mine.clone(), op="max"),
                       torch.arange(n, dtype=torch.float32) * w + cycle), cycle
    gathered = comm.all_gather(torch.full((3,), r + cycle, dtype=torch.int64))
    assert gathered.tolist() == [q + cycle for q in range(w) for _ in range(3)], cycle
    part = comm.reduce_scatter(mine.clone())
    assert torch.equal(part, expect.chunk(w)[r]), cycle
    b = np.full(5, r * 10 + cycle, np.int32)
    comm.broadcast(b, src=cycle % w)
    assert (b == (cycle % w) * 10 + cycle).all(), cycle
    reg = comm.empty((n,), torch.float32)
    reg.copy_(mine)
    assert torch.equal(comm.all_reduce(reg), expect), cycle
    comm.free(reg)
    assert comm.route("all_reduce", 4 * n)[0] and comm.plan()
    comm.barrier()
    sub = comm.split(color=r % 2, key=-r)
    assert sub.size == len(range(r % 2, w, 2)), cycle
    s = torch.full((2,), float(r))
    assert torch.equal(sub.all_reduce(s), torch.full((2,), float(sum(range(r % 2, w, 2))))), cycle
    sub.close()
    comm.close()
    try:
        comm.barrier()
    except ValueError as e:
        assert "closed" in str(e)
    else:
        raise AssertionError("a closed communicator took a call")
ok("100 cycles")
"""


def test_create_every_call_split_close_a_hundred_times_beside_torch(tmp_path):
    run = run_ranks(tmp_path, CYCLES, n=3, timeout=140)
    run.expect_ok(3)
    # The suite's own torch is the ranks' torch: its CUDA build was loaded there.
    assert f"CUDA build: {torch.version.cuda is not None}" in run.output, run.output
