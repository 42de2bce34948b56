"""close() from another thread while a call runs (calls release the GIL): the process must not
crash, the running call ends with its result or a tpcomm error, and every later call is refused
with "this communicator was closed". On shm, Gloo (shm disabled) and hier (two simulated nodes,
which need root for their namespaces)."""

import pytest

from conftest import ENGINES, engine_setup, run_ranks


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_close_from_another_thread_during_calls_ends_them_with_an_error_not_a_crash(
    tmp_path, engine
):
    env, n, args = engine_setup(engine)
    run = run_ranks(
        tmp_path,
        """
        import threading, time
        comm = tpcomm.Communicator.from_env(timeout=10)
        n, r = comm.size, comm.rank
        count = 1 << 16  # 256 KiB: calls long enough that close() lands inside one
        base = torch.arange(count, dtype=torch.float32) % 101
        done, errors = [], []

        def calls():
            i = 0
            try:
                while True:
                    t = base + r + i
                    comm.all_reduce(t)
                    want = sum(base + q + i for q in range(n))
                    assert torch.equal(t, want), f"all_reduce #{i} returned wrong data"
                    g = comm.all_gather(base + r + i)
                    assert torch.equal(g, torch.cat([base + q + i for q in range(n)])), i
                    i += 1
            except (tpcomm.Error, ValueError) as e:  # a tpcomm error, or the closed refusal
                errors.append(e)
            done.append(i)

        worker = threading.Thread(target=calls)
        worker.start()
        time.sleep(0.5 + 0.1 * r)
        comm.close()
        worker.join(30)
        assert not worker.is_alive(), "the call running during close() did not end"
        assert done and errors, (done, errors)
        print(f"rank {r}: {done[0]} calls, then {type(errors[0]).__name__}: {errors[0]}",
              flush=True)
        refused(lambda: comm.all_reduce(torch.ones(4)), "this communicator was closed")
        refused(lambda: comm.barrier(), "this communicator was closed")
        comm.close()  # twice is fine
        ok()
    """,
        n=n,
        env=env,
        args=args,
    )
    run.expect_ok(n)
