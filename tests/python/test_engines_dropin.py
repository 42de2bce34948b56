"""tpcomm.engines.TpcommCustomAllreduce, the custom all-reduce drop-in for vLLM's and SGLang's
seam, on its own (no engine installed): a CPU TP group of 2 ranks made through torch.distributed
(Gloo) as the engines make theirs, every result checked element by element against sums computed
here. What the engines do with it is tests/engines' (make test-engines). Without a GPU, CUDA
tensors and graph capture do not run here: capture() is checked for what it does around the
body (the flag, one registration on normal exit, none after an exception)."""

from conftest import free_port, run_ranks

SETUP = """
    import torch.distributed as dist
    from tpcomm.engines import TpcommCustomAllreduce
    from tpcomm.engines import custom_all_reduce as module
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TEST_TORCH_PORT']}",
                            rank=RANK, world_size=int(os.environ["WORLD_SIZE"]))
    group = dist.new_group(backend="gloo")   # the engines' CPU group of the TP ranks
    ca = TpcommCustomAllreduce(group=group, device=torch.device("cpu"))
    n, r = ca.world_size, ca.rank
    assert (r, n) == (dist.get_rank(), dist.get_world_size()) and not ca.disabled
"""


def run(tmp_path, body):
    code = SETUP + body
    run_ranks(tmp_path, code, n=2, env={"TEST_TORCH_PORT": str(free_port())}).expect_ok(2)


def test_custom_all_reduce_sums_every_dtype_out_of_place(tmp_path):
    run(
        tmp_path,
        """
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64,
               torch.uint8):
        x = (torch.arange(1000) % 50 + 3 * r).to(dt)
        before = x.clone()
        assert ca.should_custom_ar(x), dt
        out = ca.custom_all_reduce(x)
        want = sum((torch.arange(1000) % 50 + 3 * q) for q in range(n)).to(dt)
        assert out is not x and out.dtype == dt and out.shape == x.shape
        assert torch.equal(out, want), (dt, out[:8], want[:8])
        assert torch.equal(x, before), "the input is left as it is"
    # A non-contiguous input (a transposed view) is reduced as the tensor it is.
    m = (torch.arange(24, dtype=torch.float32).reshape(4, 6) + 10 * r).t()
    out = ca.custom_all_reduce(m)
    want = sum((torch.arange(24, dtype=torch.float32).reshape(4, 6) + 10 * q) for q in range(n)).t()
    assert out.shape == (6, 4) and torch.equal(out, want)
    # The gate is the plan's route: yes wherever the plan keeps the call off NCCL (a CPU
    # group's plan never routes to NCCL), no for dtypes tpcomm does not reduce.
    for nbytes in (4, 4096, 1 << 20, 64 << 20):
        backend, _ = ca.comm.route("all_reduce", nbytes, "float32")
        assert ca.gate(nbytes, torch.float32) == (backend != "nccl") == True, (nbytes, backend)
    for dt in (torch.float64, torch.bool):
        x = torch.ones(16, dtype=dt)
        assert not ca.should_custom_ar(x) and ca.custom_all_reduce(x) is None, dt
    ok()
    """,
    )


def test_the_gate_declines_what_the_plan_gives_to_nccl_and_caches_its_answer(tmp_path):
    run(
        tmp_path,
        """
    # Every rank sees the same plan; here a plan that gives 8 KiB and more to NCCL, as a CUDA
    # group's plan does for large calls.
    real, asked = ca.comm.route, []
    def route(op, nbytes, dtype, mode="eager"):
        asked.append((op, nbytes, dtype, mode))
        return ("nccl", "nccl") if nbytes >= 8192 else real(op, nbytes, dtype, mode)
    ca.comm.route = route
    big = torch.full((2048,), float(r + 1))          # 8 KiB
    small = torch.full((2047,), float(r + 1))
    assert not ca.should_custom_ar(big) and ca.custom_all_reduce(big) is None
    out = ca.custom_all_reduce(small)
    assert torch.equal(out, torch.full((2047,), float(sum(range(1, n + 1)))))
    # A pure function of (bytes, dtype, mode): asked of the plan once per key.
    for _ in range(3):
        ca.should_custom_ar(big), ca.should_custom_ar(small)
    assert asked == [("all_reduce", 8192, "float32", "eager"),
                     ("all_reduce", 8188, "float32", "eager")], asked
    # The same bytes of another dtype is another key.
    assert not ca.should_custom_ar(torch.zeros(4096, dtype=torch.bfloat16))
    assert len(asked) == 3 and asked[-1][2] == "bfloat16"
    ca.comm.route = real
    # max_size: the gate's own limit, on a communicator shared with `ca`.
    capped = TpcommCustomAllreduce(group, "cpu", max_size=1024, comm=ca.comm)
    assert capped.custom_all_reduce(torch.ones(257)) is None       # 1028 bytes
    out = capped.custom_all_reduce(torch.full((256,), float(r)))   # 1024 bytes
    assert torch.equal(out, torch.full((256,), float(sum(range(n)))))
    capped.close()
    assert capped.disabled and not ca.comm.aborted
    x = torch.full((8,), 2.0 ** r)
    assert torch.equal(ca.custom_all_reduce(x), torch.full((8,), float(2 ** n - 1))), \\
        "the shared communicator outlives the object that borrowed it"
    ok()
    """,
    )


def test_capture_registers_the_graph_buffers_once_after_a_normal_exit(tmp_path):
    run(
        tmp_path,
        """
    calls = []
    real = ca.comm.register_graph_buffers
    def register():
        calls.append(ca._IS_CAPTURING)
        return real()
    ca.comm.register_graph_buffers = register
    with ca.capture():
        assert ca._IS_CAPTURING and calls == []
        out = ca.custom_all_reduce(torch.full((32,), float(r)))
        assert torch.equal(out, torch.full((32,), float(sum(range(n)))))
    assert not ca._IS_CAPTURING
    assert calls == [False], "registered once, after capture"
    assert ca.registered_buffers == 0, "a CPU communicator captures nothing"
    try:
        with ca.capture():
            raise KeyError("capture failed")
    except KeyError:
        pass
    assert calls == [False] and not ca._IS_CAPTURING, "no registration after a failed capture"
    ok()
    """,
    )


def test_bad_input_names_the_cause_and_close_disables(tmp_path):
    run(
        tmp_path,
        """
    refused(lambda: ca.should_custom_ar([1.0, 2.0]), "expected a torch.Tensor, got list",
            TypeError)
    refused(lambda: ca.custom_all_reduce(torch.ones(4, device="meta")),
            "a tensor on meta, but this custom all-reduce serves cpu")
    refused(lambda: TpcommCustomAllreduce(group, "xpu:0"), "not xpu")
    refused(lambda: TpcommCustomAllreduce(group, None), "got None")
    refused(lambda: TpcommCustomAllreduce(None, "cpu"), "group: the TP group's CPU (Gloo)")
    refused(lambda: TpcommCustomAllreduce(group, "cpu", max_size=0), "max_size")
    refused(lambda: TpcommCustomAllreduce(group, "cpu", comm=object()), "comm: expected")
    refused(lambda: TpcommCustomAllreduce(group, "cuda:0", comm=ca.comm),
            "comm: a cpu communicator, but the device is cuda:0")
    comm = ca.comm
    ca.close()
    assert ca.disabled and not ca.should_custom_ar(torch.ones(4))
    assert ca.custom_all_reduce(torch.ones(4)) is None
    refused(comm.barrier, "this communicator was closed")
    ca.close()  # twice is fine
    ok()
    """,
    )


def test_capture_without_registration_and_the_capture_count(tmp_path):
    # vLLM's cuMem graph pool (sleep mode): its buffers cannot be shared by IPC handles, so
    # vLLM builds its custom all-reduce with register_graph_buffers=False; tpcomm's likewise.
    run(
        tmp_path,
        """
    calls = []
    real = ca.comm.register_graph_buffers
    def register():
        calls.append(1)
        return real()
    ca.comm.register_graph_buffers = register
    cumem = TpcommCustomAllreduce(group, "cpu", comm=ca.comm, register_graph_buffers=False)
    assert cumem.register_graph_buffers is False and ca.register_graph_buffers is True
    assert cumem.captures == 0
    with cumem.capture():
        assert cumem._IS_CAPTURING
        out = cumem.custom_all_reduce(torch.arange(64, dtype=torch.float32) * (r + 1))
        want = torch.arange(64, dtype=torch.float32) * sum(range(1, n + 1))
        assert torch.equal(out, want), out
    assert calls == [] and cumem.captures == 1 and not cumem._IS_CAPTURING, calls
    with ca.capture():
        pass
    assert calls == [1] and ca.captures == 1, "the default registers, once"
    cumem.close()
    ok()
    """,
    )


def test_stats_count_the_calls_served_and_those_handed_back(tmp_path):
    run(
        tmp_path,
        """
    ca.reset_stats()
    empty = ca.stats()
    assert all(v == {"calls": 0, "bytes": 0, "routes": {}} for v in empty.values()), empty
    for i in range(10):
        x = (torch.arange(256, dtype=torch.float32) + 100 * i) * (r + 1)
        out = ca.custom_all_reduce(x)
        want = (torch.arange(256, dtype=torch.float32) + 100 * i) * sum(range(1, n + 1))
        assert torch.equal(out, want), (i, out[:4], want[:4])
    # float64 is not tpcomm's: handed back (None), counted under "engine".
    for _ in range(3):
        assert ca.custom_all_reduce(torch.full((16,), float(r), dtype=torch.float64)) is None
    s = ca.stats()["all_reduce"]
    routes = dict(s["routes"])
    assert routes.pop("engine") == {"calls": 3, "bytes": 3 * 128}, s
    assert sum(v["calls"] for v in routes.values()) == 10, s
    assert sum(v["bytes"] for v in routes.values()) == 10 * 1024, s
    assert s["calls"] == 13 and s["bytes"] == 10 * 1024 + 384, s
    assert all(not k.startswith("nccl") for k in routes), routes
    # A glue that asks the gate itself shares its own account.
    from tpcomm.engines.passed_on import PassedOn
    shared = PassedOn()
    ca.passed_on = shared
    shared.add("all_gather", 40)
    assert ca.stats()["all_gather"]["routes"]["engine"] == {"calls": 1, "bytes": 40}
    ca.reset_stats()
    s = ca.stats()
    assert s["all_reduce"]["calls"] == 0 and s["all_gather"]["calls"] == 0, s
    ok()
    """,
    )


def test_serves_follows_the_plan_for_each_collective_and_the_vllm_attributes(tmp_path):
    run(
        tmp_path,
        """
    real, asked = ca.comm.route, []
    def route(op, nbytes, dtype, mode="eager"):
        asked.append((op, nbytes))
        if op == "all_gather" and nbytes >= 4096 or op == "reduce_scatter" and nbytes >= 65536:
            return ("nccl", "nccl")
        return real(op, nbytes, dtype, mode)
    ca.comm.route = route
    assert ca.serves("all_gather", 4092, torch.float32)
    assert not ca.serves("all_gather", 4096, torch.float32)
    assert ca.serves("reduce_scatter", 65532, "float32")
    assert not ca.serves("reduce_scatter", 65536, "float32")
    assert not ca.serves("all_gather", 16, torch.float64), "a dtype tpcomm does not carry"
    assert ca.gate(65536, torch.float32), "all_reduce's own plan row"
    for _ in range(2):
        ca.serves("all_gather", 4096, torch.float32)
    assert asked.count(("all_gather", 4096)) == 1, asked
    ca.comm.route = real
    # What vLLM's model code reads: no NVLink on CPU, no multicast buffer.
    assert ca.fully_connected is False and ca.mnnvl_lamport_ag_multicast_ptr == 0
    out = ca.custom_all_reduce(torch.full((5,), float(r * 3)))
    assert torch.equal(out, torch.full((5,), float(3 * sum(range(n)))))
    ok()
    """,
    )
