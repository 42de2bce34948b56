"""Communicator.register_graph_buffers() (the binding of the C++ call engines make after CUDA
graph capture, docs/gpu-graphs.md) and route()'s mode, on CPU communicators: no CUDA here. A CPU
communicator captures nothing, so registration is a collective that shares no buffer: 0 on every
rank, and the group goes on working; a CPU communicator plans only eager calls, so asking for
the graph table is an error that says so."""

from conftest import run_ranks


def test_register_graph_buffers_on_a_cpu_communicator_returns_zero_on_every_rank(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        x = torch.arange(64, dtype=torch.float32) * (r + 1)
        comm.all_reduce(x)
        assert comm.register_graph_buffers() == 0
        assert comm.register_graph_buffers() == 0  # again: nothing captured since
        # The calls after it still match across the ranks, every element checked.
        y = torch.arange(64, dtype=torch.float32) + 100 * r
        comm.all_reduce(y)
        want = n * torch.arange(64, dtype=torch.float32) + 100 * sum(range(n))
        assert torch.equal(y, want), y
        comm.close()
        refused(comm.register_graph_buffers, "this communicator was closed")
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_route_takes_the_mode_and_a_cpu_communicator_has_no_graph_table(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        for nbytes in (0, 4096, 1 << 20):
            assert comm.route("all_reduce", nbytes, "float32", mode="eager") == \\
                comm.route("all_reduce", nbytes, "float32")
        refused(lambda: comm.route("all_reduce", 4096, "float32", mode="graph"),
                "plans only its options.mode (eager)")
        refused(lambda: comm.route("all_reduce", 4096, "float32", mode="replay"),
                "mode 'replay' is not one of eager, graph")
        comm.close()
        ok()
    """,
        n=2,
    ).expect_ok(2)
