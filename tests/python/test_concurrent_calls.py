"""Two Python threads calling one communicator at once (calls release the GIL): the calls are
serialised per communicator in arrival order, so every result is right. Each rank's two threads
meet at a barrier before each call, so both issue the same call of round i together, in
whichever order the rank's serialiser picks; the ranks may pair the threads differently, so the all-reduce data
depends on rank and round only, and an all-gather block may be either thread's of that peer, but
must be one thread's whole block of that round. On shm, Gloo (shm disabled) and hier (two
simulated nodes, which need root for their namespaces)."""

import pytest

from conftest import ENGINES, engine_setup, run_ranks


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_two_threads_calling_one_communicator_get_every_element_right(tmp_path, engine):
    env, n, args = engine_setup(engine)
    run_ranks(
        tmp_path,
        """
        import threading
        comm = tpcomm.Communicator.from_env(timeout=20)
        n, r = comm.size, comm.rank
        rounds = 60
        sizes = (1, 1000, 70_000)  # below and above the sizes where the algorithms change
        lockstep = threading.Barrier(2, timeout=30)
        failures = []

        def gathered_block_is_one_threads(block, q, i, count):
            # Thread k of rank q sent q * 1e4 + k * 1e3 + i, plus its position mod 7.
            tail = torch.arange(count, dtype=torch.float32) % 7
            return any(torch.equal(block, q * 1e4 + k * 1e3 + i + tail) for k in (0, 1))

        def calls(k):
            try:
                for i in range(rounds):
                    count = sizes[i % len(sizes)]
                    tail = torch.arange(count, dtype=torch.float32) % 7
                    lockstep.wait()
                    t = r + i + tail
                    comm.all_reduce(t)
                    want = sum(q + i + tail for q in range(n))
                    if not torch.equal(t, want):
                        failures.append(f"thread {k}: all_reduce round {i} x {count} wrong")
                    lockstep.wait()  # both threads' all-reduces are done: gathers only
                    g = comm.all_gather(r * 1e4 + k * 1e3 + i + tail)
                    mine = g[r * count:(r + 1) * count]
                    if not torch.equal(mine, r * 1e4 + k * 1e3 + i + tail):
                        failures.append(f"thread {k}: all_gather round {i}: own block wrong")
                    for q in range(n):
                        block = g[q * count:(q + 1) * count]
                        if not gathered_block_is_one_threads(block, q, i, count):
                            failures.append(f"thread {k}: all_gather round {i} x {count}: "
                                            f"rank {q}'s block is no thread's data")
            except Exception as e:
                failures.append(f"thread {k}: {type(e).__name__}: {e}")
                lockstep.abort()

        threads = [threading.Thread(target=calls, args=(k,)) for k in (0, 1)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(100)
        assert not any(th.is_alive() for th in threads), "a thread did not finish"
        assert not failures, failures[:5]
        comm.barrier()
        ok(f"{2 * rounds * 2} calls from two threads")
    """,
        n=n,
        env=env,
        args=args,
        timeout=140,
    ).expect_ok(n)
