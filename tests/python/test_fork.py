"""A rank that forks: the child's inherited communicator refuses calls with an error naming
fork, and the child exiting (dropping the communicator first, or leaving it to the interpreter's
end) does nothing to the parent's group, which keeps computing the right results. On shm, Gloo
(shm disabled) and hier (two simulated nodes, which need root for their namespaces)."""

import pytest

from conftest import ENGINES, engine_setup, run_ranks


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_forked_child_cannot_call_and_its_exit_leaves_the_parents_group_working(
        tmp_path, engine):
    env, n, args = engine_setup(engine)
    run_ranks(tmp_path, """
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
        for drop in (True, False):
            pid = os.fork()
            if pid == 0:  # the child: refused, then exits normally
                status = 3
                try:
                    comm.all_reduce(base + r)
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
    """, n=n, env=env, args=args, timeout=60).expect_ok(n)
