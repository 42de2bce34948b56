"""Closing a communicator normally (docs/communicator.md, "Closing"): a peer's next call fails at
once naming the rank that closed, and when every rank closes, close() returns promptly on every
rank, the one that serves the group's store (from_torch's rank 0) included."""

from conftest import run_ranks

NEXT_CALL_FAILS = """
import time
comm = tpcomm.Communicator.from_env(timeout=30)
t = np.full(1024, RANK + 1, dtype=np.float32)
comm.all_reduce(t)
assert (t == 3).all(), t
if RANK == 0:
    comm.close()
    ok("closed")
else:
    time.sleep(0.5)           # rank 0 has closed by now
    start = time.monotonic()
    try:
        comm.all_reduce(np.ones(1024, dtype=np.float32))
    except tpcomm.Error as e:
        took = time.monotonic() - start
        assert "rank 0 closed the communicator" in str(e), str(e)
        assert took < 5, took  # not the 30 s deadline
        ok(f"failed in {took:.3f} s: {e}")
    else:
        raise AssertionError("the call after rank 0 closed did not fail")
"""


def test_a_peers_next_call_fails_at_once_naming_the_rank_that_closed(tmp_path):
    for engine in ({}, {"TPCOMM_DISABLE": "shm"}):  # shm, and Gloo's closed connections
        run_ranks(tmp_path, NEXT_CALL_FAILS, env=engine).expect_ok(2)


EVERY_RANK_CLOSES = """
import time
import torch.distributed as dist
dist.init_process_group("gloo")
comm = tpcomm.Communicator.from_torch()   # rank 0 serves tpcomm's store for the group
t = np.full(64, RANK + 1, dtype=np.float32)
comm.all_reduce(t)
dist.barrier()
start = time.monotonic()
comm.close()
took = time.monotonic() - start
print(f"rank {RANK} close took {took:.3f} s", flush=True)
assert took < 2, took
dist.destroy_process_group()
ok(f"close {took:.3f} s")
"""


def test_when_every_rank_closes_close_returns_promptly_on_every_rank(tmp_path):
    run_ranks(tmp_path, EVERY_RANK_CLOSES, n=3).expect_ok(3)
