"""A rank that forks: the child's inherited communicator refuses calls with an error naming
fork, and the child exiting (dropping the communicator first, or leaving it to the interpreter's
end) does nothing to the parent's group, which keeps computing the right results. On shm, Gloo
(shm disabled) and hier (two simulated nodes, which need root for their namespaces)."""

import pytest

from conftest import ENGINES, engine_setup, run_ranks


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_forked_child_cannot_call_and_its_exit_leaves_the_parents_group_working(tmp_path, engine):
    env, n, args = engine_setup(engine)
    run_ranks(
        tmp_path,
        """
        import gc
        comm = tpcomm.Communicator.from_env(timeout=10)
        n, r = comm.size, comm.rank
        count = 70_000
        base = torch.arange(count, dtype=torch.float32) % 89

        def group_works(i):
            t = base + r + i
            comm.all_reduce(t)
            assert torch.equal(t, sum(base + q + i for q in range(n))), f"all_reduce {i} wrong"
            g = comm.all_gather(base * 2 + r + i)
            assert torch.equal(g, torch.cat([base * 2 + q + i for q in range(n)])), i

        group_works(0)
        # Made before the fork: a child must not run torch's parallel kernels (GNU OpenMP's thread
        # pool is not fork-safe: under torch 2.x an add of 70000 elements hangs in a child).
        child_input = base + r
        for drop in (True, False):
            pid = os.fork()
            if pid == 0:  # the child: refused, then exits normally
                status = 3
                try:
                    comm.all_reduce(child_input)
                    print(f"rank {r}'s child: a call on the inherited communicator returned",
                          flush=True)
                except tpcomm.Error as e:
                    status = 0 if "fork" in str(e) else 4
                    print(f"rank {r}'s child: {type(e).__name__}: {e}", flush=True)
                if drop:
                    del comm
                    gc.collect()
                sys.exit(status)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, f"the child ended with {status:#x}"
            group_works(1 if drop else 2)
        ok("the group works after two forked children")
    """,
        n=n,
        env=env,
        args=args,
        timeout=60,
    ).expect_ok(n)


def test_close_in_a_forked_child_waits_for_the_childs_own_calls(tmp_path):
    # The child's threads call the inherited communicator (refused, naming fork) while the child
    # closes it: close() must wait for the child's calls in flight (it skipped waiting in any
    # child and destroyed the communicator under them: a SIGSEGV in about one close() of 250), and
    # not for the parent's, whose threads do not exist in the child. Many close()s (nine
    # communicators in each of many children, eight children at a time), since each lands at a
    # random point of the threads' calls.
    run_ranks(
        tmp_path,
        """
        import threading, time
        comm = tpcomm.Communicator.from_env(timeout=10)
        n, r = comm.size, comm.rank
        base = torch.arange(5000, dtype=torch.float32) % 13
        batches, at_once, callers = 6, 8, 4
        comms = [comm] + [comm.split(0, r) for _ in range(8)]

        def group_works(i):
            t = base + r + i
            comm.all_reduce(t)
            assert torch.equal(t, sum(base + q + i for q in range(n))), f"all_reduce {i} wrong"

        def close_under_calls(comm):
            ends, refused_once = [], threading.Semaphore(0)

            def calls():
                refusals = 0
                while True:
                    try:
                        comm._native.barrier()
                        ends.append("a call on the inherited communicator returned")
                        return
                    except (ValueError, tpcomm.Error) as e:
                        if "closed" in str(e):
                            ends.append(refusals)
                            return
                        if "fork" not in str(e):
                            ends.append(f"{type(e).__name__}: {e}")
                            return
                        refusals += 1
                        if refusals == 1:
                            refused_once.release()

            threads = [threading.Thread(target=calls) for _ in range(callers)]
            for t in threads: t.start()
            for _ in threads: assert refused_once.acquire(timeout=10), ends
            comm.close()  # while the threads call
            for t in threads: t.join(10)
            assert not any(t.is_alive() for t in threads), "a child's thread did not end"
            assert all(isinstance(e, int) and e > 0 for e in ends), ends
            assert comm._native.closed

        def child():
            for c in comms:
                close_under_calls(c)

        def fork_child(name):
            pid = os.fork()
            if pid == 0:
                status = 0
                try:
                    child()
                except BaseException as e:
                    print(f"rank {r}'s child {name}: {type(e).__name__}: {e}", flush=True)
                    status = 3
                os._exit(status)
            return pid

        group_works(0)
        for b in range(batches):
            pids = [fork_child(f"{b}.{k}") for k in range(at_once)]
            for k, pid in enumerate(pids):
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0, (
                    f"child {b}.{k} ended with {status:#x}")
            group_works(b + 1)
        ok(f"{batches * at_once} children closed {len(comms)} inherited communicators each "
           "under their calls")
    """,
        n=2,
        timeout=120,
    ).expect_ok(2)
