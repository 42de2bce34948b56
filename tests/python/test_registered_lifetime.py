"""A tensor or array from comm.empty() keeps its memory mapped as long as it lives: after
close(), after the communicator is garbage collected, and after free(). Every element is read
and written afterwards; a call on the closed communicator with it is refused."""

from conftest import run_ranks


def test_empty_buffers_outlive_close_free_and_garbage_collection(tmp_path):
    run_ranks(
        tmp_path,
        """
        import gc
        count = 70_000  # 280 kB of float32: several pages, read in place by the peer
        comm = tpcomm.Communicator.from_env(timeout=20)
        n, r = comm.size, comm.rank
        base = torch.arange(count, dtype=torch.float32) % 97

        def use(t, v, what):
            # Every element as written, then a new value in every element, read back.
            assert torch.equal(t, base + v), f"{what}: the values were not kept"
            t.copy_(base * 2 + v)
            assert torch.equal(t, base * 2 + v), f"{what}: the write was not kept"

        closed = comm.empty((count,), torch.float32)
        closed.copy_(base + r)
        comm.all_reduce(closed, out=torch.empty_like(closed))  # read in place by the peer
        freed = comm.empty((count,), "float32")
        freed.copy_(base + 10 + r)
        a = comm.empty((count,), np.float32)
        a[:] = (base + 20 + r).numpy()
        comm.free(freed)
        use(freed, 10 + r, "after free()")
        comm.close()
        use(closed, r, "after close()")
        assert np.array_equal(a, (base + 20 + r).numpy()), "numpy after close()"
        a[:] = 7.0
        assert np.all(a == 7.0)
        refused(lambda: comm.all_reduce(closed), "this communicator was closed")
        refused(lambda: comm.free(closed), "this communicator was closed")

        comm = tpcomm.Communicator.from_env(timeout=20)
        dropped = comm.empty((count,), torch.float32)
        dropped.copy_(base + 30 + r)
        comm.barrier()
        del comm
        gc.collect()
        use(dropped, 30 + r, "after the communicator was garbage collected")
        del closed, freed, a, dropped
        gc.collect()  # the last tensors over the buffers go: their memory with them
        ok()
    """,
        n=2,
    ).expect_ok(2)
