"""A communicator dropped by garbage collection is destroyed with the GIL released: its
destruction joins tpcomm's threads (the store's, Gloo's, hier's) and waits on the store, and a
thread that logs through a Python log sink needs the GIL to do so. With the GIL held the
destructor waited for the store's thread while that thread waited for the GIL: a hang."""

from conftest import run_ranks


def test_dropping_a_gloo_communicator_whose_store_thread_logs_to_a_python_sink_does_not_hang(
    tmp_path,
):
    # Both ranks in this one process (two threads), rank 0 serving the store (StoreHost), so
    # that this process's garbage collection is what stops the store's thread. A stranger's
    # bad frame makes that thread log a warning through the sink, which releases the GIL for a
    # moment (as a sink writing to a file does): the main thread drops rank 0's communicator
    # meanwhile, whose destruction waits on the store's thread (the goodbye, then the join).
    run_ranks(
        tmp_path,
        """
        import faulthandler, gc, socket, threading, time
        from tpcomm import _tpcomm

        lines, in_sink = [], threading.Event()

        def sink(level, subsystem, message):
            lines.append((subsystem, message))
            if subsystem == "store" and "dropped" in message:
                in_sink.set()
                time.sleep(0.5)  # the GIL released, as by a write

        tpcomm.set_log_sink(sink)
        host = tpcomm.StoreHost("127.0.0.1")
        address = host.address
        comms = [None, None]

        def create(r):
            comms[r] = tpcomm.Communicator(
                _tpcomm.Comm.from_address(address, r, 2, 10.0, "cpu", -1,
                                          host if r == 0 else None), "cpu")

        threads = [threading.Thread(target=create, args=(r,)) for r in (0, 1)]
        for t in threads: t.start()
        for t in threads: t.join(30)
        assert all(comms), "creation did not finish"
        assert comms[0].route("all_reduce", 4096, "float32")[0] == "gloo", comms[0].route(
            "all_reduce", 4096, "float32")

        def reduce(r, out):
            t = torch.arange(1000, dtype=torch.float32) * (r + 1)
            out[r] = comms[r].all_reduce(t)
        out = [None, None]
        threads = [threading.Thread(target=reduce, args=(r, out)) for r in (0, 1)]
        for t in threads: t.start()
        for t in threads: t.join(30)
        assert all(torch.equal(o, torch.arange(1000, dtype=torch.float32) * 3) for o in out), out

        del comms[1:]  # rank 1 first: its goodbye to the store is answered
        gc.collect()
        _, store_host, store_port = address.split()[:3]
        stranger = socket.create_connection((store_host, int(store_port)))
        time.sleep(0.3)  # accepted by the store's thread
        # A hang ends the process here with every thread's stack, well before the test's limit.
        faulthandler.dump_traceback_later(20, exit=True)
        stranger.sendall(b"\\xff" * 12)  # not a frame: the store drops it and logs a warning
        assert in_sink.wait(10), lines
        started = time.monotonic()
        del comms[0]
        gc.collect()
        took = time.monotonic() - started
        faulthandler.cancel_dump_traceback_later()
        stranger.close()
        tpcomm.set_log_sink(None)
        assert any(s == "store" and "dropped" in m for s, m in lines), lines
        print(f"rank 0's communicator destroyed in {took:.2f} s", flush=True)
        ok()
    """,
        n=1,
        env={"TPCOMM_DISABLE": "shm"},
        timeout=60,
    ).expect_ok(1)
