"""Errors a caller can cause are ValueErrors raised before any rank blocks (only rank 0 makes the
bad calls, then both ranks make a good one, which must match); errors from peers (dead rank,
timeout, mismatch) are tpcomm.Error subclasses carrying the library's message."""

from conftest import run_ranks


def test_bad_arguments_are_value_errors_before_any_rank_blocks(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=20)
        r = comm.size and comm.rank
        ro = np.ones(4, np.float32)
        ro.flags.writeable = False
        cases = [
            (lambda: comm.all_reduce(torch.ones(4, 6).t()), ValueError, "not contiguous"),
            (lambda: comm.all_reduce(torch.ones(4, dtype=torch.float64)), ValueError, "dtype torch.float64"),
            (lambda: comm.all_reduce(np.ones(4, np.int16)), ValueError, "dtype int16"),
            (lambda: comm.reduce_scatter(torch.ones(3)), ValueError, "3 elements do not divide among 2"),
            (lambda: comm.all_reduce(torch.ones(4), out=torch.ones(5)), ValueError, "out: 5 elements"),
            (lambda: comm.all_gather(torch.ones(4), out=torch.ones(4)), ValueError, "the call writes 8"),
            (lambda: comm.reduce_scatter(torch.ones(4), out=torch.ones(4)), ValueError, "the call writes 2"),
            (lambda: comm.all_reduce(torch.ones(4), out=torch.ones(4, dtype=torch.float16)), ValueError, "out: float16"),
            (lambda: comm.all_reduce(torch.ones(4), op="prod"), ValueError, "op 'prod'"),
            (lambda: comm.broadcast(torch.ones(4), src=2), ValueError, "src 2 is not a rank"),
            (lambda: comm.all_reduce([1.0, 2.0]), TypeError, "got list"),
            (lambda: comm.all_reduce(np.ones(8, np.float32)[::2]), ValueError, "not C-contiguous"),
            (lambda: comm.all_reduce(ro), ValueError, "read-only"),
            (lambda: comm.route("all_reduce", 4096, "int8"), ValueError, "dtype 'int8'"),
            (lambda: comm.route("all_to_one", 4096), tpcomm.InvalidInputError, "op 'all_to_one'"),
        ]
        if r == 0:
            for call, kind, text in cases:
                refused(call, text, kind)
        t = torch.ones(8)
        comm.all_reduce(t)
        assert torch.equal(t, torch.full((8,), 2.0)), t
        ok(f"{len(cases)} refusals")
    """,
    ).expect_ok(2)


def test_a_dead_peer_raises_on_the_survivor_naming_it(tmp_path):
    run = run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=10)
        comm.all_reduce(torch.ones(16))
        if comm.rank == 1:
            os._exit(3)
        try:
            comm.all_reduce(torch.ones(1 << 16))
        except tpcomm.Error as e:
            print(f"rank 0 caught {type(e).__name__} code={e.code}: {e}", flush=True)
            assert "rank 1" in str(e), str(e)
            try:
                comm.barrier()
            except tpcomm.AbortedError as later:
                assert "aborted earlier" in str(later) and later.code == "aborted"
                ok("then AbortedError")
        else:
            raise SystemExit("the call on a dead peer returned")
    """,
        args=("--keep-going",),
    )
    assert run.returncode != 0, run.output  # rank 1 exited 3
    assert run.ok_ranks() == [0], run.output


def test_calls_that_differ_across_ranks_are_a_mismatch_error_on_every_rank(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=20)
        try:
            comm.all_reduce(torch.ones(8 if comm.rank == 0 else 16))
        except tpcomm.MismatchError as e:
            assert e.code == "mismatch" and "does not match across ranks" in str(e), str(e)
            ok()
    """,
        env={"TPCOMM_CHECK": "1"},
    ).expect_ok(2)


def test_a_rank_that_does_not_come_is_a_timeout_error_which_is_a_builtin_timeout_error(tmp_path):
    # The timeout also bounds creation, which under the sanitizers with other tests beside took
    # more than 2 s on the 2-vCPU VM: 8 s, and rank 1 stays alive (absent, not dead: that would
    # be another error) until rank 0 has had its timeout, however long creation took.
    run = run_ranks(
        tmp_path,
        """
        import time
        comm = tpcomm.Communicator.from_env(timeout=8)
        done = os.path.join(os.getcwd(), "rank0-done")
        if comm.rank == 1:
            for _ in range(900):
                if os.path.exists(done):
                    break
                time.sleep(0.1)
            os._exit(0)
        try:
            comm.all_reduce(torch.ones(4))
        except TimeoutError as e:
            assert isinstance(e, tpcomm.TimeoutError) and e.code == "timeout", repr(e)
            assert "rank 1" in str(e), str(e)
            ok()
        finally:
            open(done, "w").close()
    """,
        args=("--keep-going",),
    )
    assert run.ok_ranks() == [0], run.output


def test_log_sink_receives_the_librarys_lines(tmp_path):
    run_ranks(
        tmp_path,
        """
        lines = []
        tpcomm.set_log_level("info")
        tpcomm.set_log_sink(lambda level, subsystem, message: lines.append((level, subsystem, message)))
        comm = tpcomm.Communicator.from_env(timeout=20)
        assert any(l == "info" and s == "comm" and ": ready, plan " in m for l, s, m in lines), lines
        tpcomm.set_log_sink(None)
        path = os.path.join(os.getcwd(), f"log-{comm.rank}.txt")
        tpcomm.set_log_file(path)
        sub = comm.split(0)
        tpcomm.set_log_file("")
        assert "split #1 color 0" in open(path).read()
        try:
            tpcomm.set_log_level("loud")
        except ValueError as e:
            assert "loud" in str(e)
        ok()
    """,
    ).expect_ok(2)


def test_a_store_port_held_by_a_socket_that_does_not_listen_is_named(tmp_path):
    # A bound socket that never listens (an outgoing connection's local port looks the same):
    # rank 0 cannot serve there and nobody answers; the error says why, not only "cannot reach".
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    try:
        run = run_ranks(
            tmp_path,
            """
            try:
                tpcomm.Communicator.from_env(timeout=3)
            except tpcomm.Error as e:
                if RANK == 0:
                    assert "rank 0 could not serve the store there itself" in str(e), str(e)
                    assert "Address already in use" in str(e), str(e)
                ok()
        """,
            launcher="srun",
            env={"TPCOMM_STORE_PORT": str(port)},
        )
        run.expect_ok(2)
    finally:
        holder.close()


def test_a_tensor_on_another_gpu_than_the_communicators_is_refused_before_any_call(tmp_path):
    # No machine here has two GPUs to put a tensor on the wrong one (this one has none, the device
    # machine one), so the package is handed a communicator's native side that says its GPU is
    # cuda:0 and fails if called, and a CPU tensor that says it is on cuda:1 the way torch says
    # so (is_cuda, get_device()); the package's own buffer checks run unchanged.
    run_ranks(
        tmp_path,
        """
        from tpcomm.communicator import Communicator
        comm = tpcomm.Communicator.from_env(timeout=20)
        assert comm.cuda_device is None, comm.cuda_device

        class Native:
            cuda_device, rank, size = 0, 0, 2
            def __getattr__(self, name):
                raise AssertionError(f"the native {name} was called for a refused buffer")

        class OnGpu(torch.Tensor):
            @property
            def is_cuda(self):
                return True
            @property
            def is_cpu(self):
                return False
            def get_device(self):
                return self.gpu

        def on_gpu(t, gpu):
            t = t.as_subclass(OnGpu)
            t.gpu = gpu
            return t

        gpu0 = Communicator(Native(), "cuda")
        assert gpu0.cuda_device == 0
        x = on_gpu(torch.ones(8), 1)
        says = "a tensor on cuda:1, but this communicator's calls run on cuda:0"
        for call in (lambda: gpu0.all_reduce(x), lambda: gpu0.all_gather(x),
                     lambda: gpu0.reduce_scatter(x), lambda: gpu0.broadcast(x),
                     lambda: gpu0.all_reduce(x, out=on_gpu(torch.ones(8), 1))):
            refused(call, says)
        # An output on another GPU than its input is refused too, naming both.
        refused(lambda: gpu0.all_reduce(on_gpu(torch.ones(8), 0), out=x),
                "out: float32 on cuda:1, but the input is float32 on cuda:0")
        comm.barrier()
        ok("refused")
    """,
    ).expect_ok(2)
