"""Every call on torch tensors (float32, float16, bfloat16, int32, int64, uint8) and numpy arrays
(float32, float16, int32, int64, uint8), checked element by element against references computed
here with torch and numpy, never with tpcomm: integer-valued data that every dtype holds exactly,
random data whose rounding the reference reproduces (one fp32 addition of two ranks' values,
rounded to nearest even by torch or numpy), and integers at their types' extremes, whose sums
wrap as torch's and numpy's do."""

from conftest import engine_setup, run_ranks


def test_every_call_and_dtype_on_torch_tensors(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        base = torch.arange(1000, dtype=torch.float32) % 50
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            t = (base + r).to(dt)
            assert comm.all_reduce(t) is t
            want = sum(base + q for q in range(n)).to(dt)
            assert torch.equal(t, want), (dt, t[:8], want[:8])
            def signed(q):
                return (base * (1 if q % 2 else -1) + q).to(dt)
            for op in ("max", "min"):
                x = signed(r)
                out = torch.empty_like(x)
                assert comm.all_reduce(x, op=op, out=out) is out
                stacked = torch.stack([signed(q).float() for q in range(n)])
                ref = (stacked.amax(0) if op == "max" else stacked.amin(0)).to(dt)
                assert torch.equal(out, ref), (dt, op)
                assert torch.equal(x, signed(r)), "out of place keeps the input"
            g = comm.all_gather((base[:10] + r).to(dt).reshape(2, 5))
            assert g.shape == (2 * n, 5)
            assert torch.equal(g, torch.cat([(base[:10] + q).to(dt).reshape(2, 5) for q in range(n)]))
            big = (torch.arange(4 * n * 3, dtype=torch.float32) % 17 + r).to(dt).reshape(4 * n, 3)
            s = comm.reduce_scatter(big)
            full = sum((torch.arange(4 * n * 3, dtype=torch.float32) % 17 + q) for q in range(n))
            assert s.shape == (4, 3)
            assert torch.equal(s, full.to(dt).reshape(4 * n, 3)[4 * r:4 * r + 4]), dt
            o = torch.empty(4, 3, dtype=dt)
            assert comm.reduce_scatter(big, out=o) is o and torch.equal(o, s)
            b = (base + 7 * r).to(dt)
            comm.broadcast(b, src=n - 1)
            assert torch.equal(b, (base + 7 * (n - 1)).to(dt))
        # avg in fp32: the sum divided by the size.
        x = torch.full((100,), float(r + 1))
        comm.all_reduce(x, op="avg")
        assert torch.equal(x, torch.full((100,), sum(range(1, n + 1)) / n))
        comm.barrier()
        ok()
    """,
        n=3,
    ).expect_ok(3)


def test_in_place_all_reduce_of_a_plain_tensor_skips_the_checked_path_and_others_take_it(tmp_path):
    run_ranks(
        tmp_path,
        """
        from tpcomm import _buffers
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        comm.all_reduce(torch.zeros(4))  # the first tensor the package sees
        checked = _buffers.view
        def no_view(*args, **kwargs):
            raise AssertionError("the checked path ran")
        _buffers.view = no_view
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            t = (torch.arange(300) % 7 + r).to(dt)
            assert comm.all_reduce(t, op="max") is t
            assert torch.equal(t, (torch.arange(300) % 7 + n - 1).to(dt)), dt
        _buffers.view = checked
        # A subclass of torch.Tensor goes the checked way, with the same result.
        p = torch.nn.Parameter(torch.full((5,), float(r + 1)), requires_grad=False)
        assert comm.all_reduce(p) is p
        assert torch.equal(p.data, torch.full((5,), float(sum(range(1, n + 1)))))
        # So does every call the fast path cannot take, and each is refused as before.
        for bad, op, says in ((torch.zeros(4, 4).t(), "sum", "not contiguous"),
                              (torch.zeros(4, dtype=torch.int16), "sum", "dtype torch.int16"),
                              (torch.zeros(4, dtype=torch.bool), "avg", "not defined for bool"),
                              (torch.zeros(4, device="meta"), "sum", "a meta buffer on a cpu"),
                              (torch.zeros(4), "prod", "op 'prod'")):
            refused(lambda: comm.all_reduce(bad, op=op), says)
        comm.barrier()
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_random_fp16_and_bf16_round_as_one_fp32_addition_rounded_to_nearest_even(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        r = comm.rank
        def data(q):
            g = torch.Generator().manual_seed(1234 + q)
            return torch.randn(4097, generator=g) * 3
        for dt in (torch.float16, torch.bfloat16):
            t = data(r).to(dt)
            comm.all_reduce(t)
            want = (data(0).to(dt).float() + data(1).to(dt).float()).to(dt)
            bad = (t.view(torch.int16) != want.view(torch.int16)).nonzero()
            assert bad.numel() == 0, (dt, bad[:5].flatten().tolist())
        a = np.random.default_rng(99 + r).standard_normal(3001).astype(np.float16)
        others = [np.random.default_rng(99 + q).standard_normal(3001).astype(np.float16) for q in (0, 1)]
        comm.all_reduce(a)
        want = (others[0].astype(np.float32) + others[1].astype(np.float32)).astype(np.float16)
        assert np.array_equal(a.view(np.uint16), want.view(np.uint16))
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_all_reduce_rmsnorm_in_every_form_against_a_float64_reference(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        rows, hidden, eps = 5, 100, 1e-5
        def data(q, dt, seed=7):  # rank q's input (q = -1: the residual, -2: the weight)
            g = torch.Generator().manual_seed(seed * 100 + q + 3)
            return (torch.rand(rows, hidden, generator=g) * 4 - 2).to(dt)
        def reference(dt, residual):  # float64 from the rounded inputs; the residual rounded once
            s = sum(data(q, dt).double() for q in range(n))
            if residual:
                s = s + data(-1, dt).double()
            kept = s.to(dt).double()
            w = data(-2, dt)[0].double() / 2 + 1.5
            return kept * torch.rsqrt(kept.pow(2).mean(-1, keepdim=True) + eps) * w, s
        for dt, tol in ((torch.float32, 2e-5), (torch.bfloat16, 2 ** -6), (torch.float16, 2 ** -9)):
            w = (data(-2, dt)[0].float() / 2 + 1.5).to(dt)
            want, want_res = reference(dt, True)
            x, res = data(r, dt), data(-1, dt)
            out, res_out = comm.all_reduce_rmsnorm(x, res, w, eps)
            assert out.dtype == dt and out.shape == (rows, hidden)
            assert torch.allclose(out.double(), want, rtol=tol, atol=tol), (dt, (out.double() - want).abs().max())
            assert torch.allclose(res_out.double(), want_res, rtol=tol, atol=tol), dt
            assert torch.equal(x, data(r, dt)) and torch.equal(res, data(-1, dt)), "inputs kept"
            # In place, as vLLM's fused_add_rms_norm: the norm over x, the new residual over res.
            got = comm.all_reduce_rmsnorm(x, res, w, eps, inplace=True)
            assert got[0] is x and got[1] is res
            assert torch.equal(x, out) and torch.equal(res, res_out), dt
            # No residual: the norm of the sum, and the sum itself where asked for.
            want, want_sum = reference(dt, False)
            o, none = comm.all_reduce_rmsnorm(data(r, dt), None, w, eps)
            assert none is None
            assert torch.allclose(o.double(), want, rtol=tol, atol=tol), dt
            total = torch.empty(rows, hidden, dtype=dt)
            o2, s = comm.all_reduce_rmsnorm(data(r, dt), None, w, eps, residual_out=total)
            assert s is total and torch.equal(o2, o)
            assert torch.allclose(s.double(), want_sum, rtol=tol, atol=tol), dt
        a = data(r, torch.float32).numpy()
        wa = (data(-2, torch.float32)[0] / 2 + 1.5).numpy()
        o, _ = comm.all_reduce_rmsnorm(a, None, wa, eps)
        assert isinstance(o, np.ndarray) and o.dtype == np.float32
        want, _ = reference(torch.float32, False)
        assert np.allclose(o, want.numpy(), rtol=2e-5, atol=2e-5)
        # Refused here, before anything blocks (every rank makes the same bad calls).
        x, res = data(r, torch.float32), data(-1, torch.float32)
        w = torch.ones(hidden)
        for call, says in [
            (lambda: comm.all_reduce_rmsnorm(x, res, torch.ones(hidden + 1), eps), "but the rows hold 100"),
            (lambda: comm.all_reduce_rmsnorm(x, res[:4], w, eps), "residual: float32 of shape (4, 100)"),
            (lambda: comm.all_reduce_rmsnorm(x, res.half(), w, eps), "residual: float16"),
            (lambda: comm.all_reduce_rmsnorm(x, res, w, eps, inplace=True, out=x), "pass no out="),
            (lambda: comm.all_reduce_rmsnorm(x.sum(), res, w, eps), "a 0-d input has no rows"),
            (lambda: comm.all_reduce_rmsnorm(x.int(), None, w.int(), eps), "int32 is not float32"),
        ]:
            try:
                call()
            except ValueError as e:
                assert says in str(e), (says, str(e))
            else:
                raise AssertionError(f"not refused: {says}")
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_deterministic_mode_from_the_environment_and_the_keyword(tmp_path):
    # TPCOMM_DETERMINISTIC=1 sets the default; the keyword wins over it.
    for keyword, want in (("", True), ("deterministic=False", False)):
        run_ranks(
            tmp_path,
            f"""
            comm = tpcomm.Communicator.from_env(timeout=30, {keyword})
            assert comm.plan().get("deterministic", False) is {want}, comm.plan()
            assert ("deterministic (every reduction" in comm.plan_text()) is {want}
            # all_reduce(x)[a:b] has the bits of all_reduce(x[a:b]) (shm: in either mode).
            g = torch.Generator().manual_seed(5 + comm.rank)
            x = (torch.randn(70001, generator=g) * 100).to(torch.bfloat16)
            whole = comm.all_reduce(x.clone())
            for a, b in ((0, 1), (17, 4113), (65000, 70001)):
                part = comm.all_reduce(x[a:b].clone())
                assert torch.equal(part.view(torch.int16), whole[a:b].view(torch.int16)), (a, b)
            ok()
        """,
            n=2,
            env={"TPCOMM_DETERMINISTIC": "1"},
        ).expect_ok(2)


def test_numpy_arrays(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        for dt in (np.float32, np.float16):
            a = (np.arange(600) % 31 + r).astype(dt)
            comm.all_reduce(a)
            assert np.array_equal(a, sum((np.arange(600) % 31 + q) for q in range(n)).astype(dt))
            g = comm.all_gather(np.full((3,), r, dtype=dt))
            assert g.dtype == dt and np.array_equal(g, np.repeat(np.arange(n), 3).astype(dt))
            s = comm.reduce_scatter(np.arange(2 * n, dtype=dt))
            assert np.array_equal(s, (n * np.arange(2 * n, dtype=np.float32)[2 * r:2 * r + 2]).astype(dt))
            b = np.full((5,), r + 10, dtype=dt)
            comm.broadcast(b, src=0)
            assert np.array_equal(b, np.full((5,), 10, dtype=dt))
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_integer_and_bool_tensors_and_arrays_reduce_exactly_as_torch_and_numpy_do(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        for dt in (torch.int32, torch.int64, torch.uint8):
            info = torch.iinfo(dt)
            def part(q):  # the type's extremes (so sums wrap), and values that differ by rank
                x = (torch.arange(3000, dtype=torch.int64) * 7919 + q * 104729) % 251 - 120
                x[::5] = info.max - q
                x[1::5] = info.min + q
                return x.to(dt)  # torch's own cast: two's complement, as numpy's
            parts = [part(q) for q in range(n)]
            wrapped = parts[0].clone()
            for p in parts[1:]:
                wrapped += p  # torch integer arithmetic wraps
            stacked = torch.stack(parts)
            for op, want in (("sum", wrapped), ("max", stacked.amax(0)), ("min", stacked.amin(0))):
                t = part(r)
                assert comm.all_reduce(t, op=op) is t
                assert torch.equal(t, want), (dt, op)
                s = comm.reduce_scatter(part(r), op=op)
                assert torch.equal(s, want.chunk(n)[r]), (dt, op)
            assert torch.equal(comm.all_gather(part(r)), torch.cat(parts)), dt
            b = part(r)
            comm.broadcast(b, src=n - 1)
            assert torch.equal(b, parts[n - 1]), dt
            refused(lambda: comm.all_reduce(part(r), op="avg"), "avg is for floating-point types")
            x = comm.empty((3000,), dt)  # registered buffers hold integers too
            x.copy_(part(r))
            comm.all_reduce(x)
            assert torch.equal(x, wrapped), dt
            comm.free(x)
        # bool: bytes of 0 and 1; sum and max a logical or (as PyTorch's NCCL group), min an and.
        def flags(q):
            return (torch.arange(1200) * (q + 3)) % 7 < 2
        for op, want in (("sum", torch.stack([flags(q) for q in range(n)]).any(0)),
                         ("max", torch.stack([flags(q) for q in range(n)]).any(0)),
                         ("min", torch.stack([flags(q) for q in range(n)]).all(0))):
            t = flags(r)
            assert comm.all_reduce(t, op=op) is t and t.dtype == torch.bool
            # As bytes: a bool must hold 0 or 1 (torch.equal of bools would take 3 as True).
            assert torch.equal(t.view(torch.uint8), want.view(torch.uint8)), op
            s = comm.reduce_scatter(flags(r), op=op)
            assert s.dtype == torch.bool, op
            assert torch.equal(s.view(torch.uint8), want.chunk(n)[r].view(torch.uint8)), op
        assert torch.equal(comm.all_gather(flags(r)), torch.cat([flags(q) for q in range(n)]))
        refused(lambda: comm.all_reduce(flags(r), op="avg"), "not defined for bool")
        refused(lambda: comm.all_reduce(flags(r), out=torch.empty(1200, dtype=torch.uint8)),
                "out: uint8 on cpu, but the input is bool")
        a = np.arange(50) % (r + 2) == 0
        comm.all_reduce(a, op="min")
        want = np.all([np.arange(50) % (q + 2) == 0 for q in range(n)], 0)
        assert a.dtype == np.bool_ and np.array_equal(a.view(np.uint8), want.view(np.uint8))
        for dt in (np.int32, np.int64, np.uint8):
            a = ((np.arange(999) * 31 + r * 17) % 200).astype(dt)
            want = sum(((np.arange(999) * 31 + q * 17) % 200).astype(np.int64) for q in range(n))
            comm.all_reduce(a)
            assert a.dtype == dt and np.array_equal(a, want.astype(dt)), dt
        comm.barrier()
        ok()
    """,
        n=3,
    ).expect_ok(3)


def test_all_gather_and_reduce_scatter_along_any_dimension_as_torch_cat_and_chunk(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        def mine(q, shape, dt):  # every element tells rank and position apart
            k = 1
            for s in shape:
                k *= s
            return ((torch.arange(k, dtype=torch.float32) % 61) * 3 + q).reshape(shape).to(dt)
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            for shape in ((2, 3, 4), (1, 5), (1, 1, 6), (3,)):
                for dim in range(-len(shape), len(shape)):
                    want = torch.cat([mine(q, shape, dt) for q in range(n)], dim=dim)
                    g = comm.all_gather(mine(r, shape, dt), dim=dim)
                    assert g.shape == want.shape and torch.equal(g, want), (dt, shape, dim)
                    o = torch.full(want.shape, -1.0, dtype=dt)
                    assert comm.all_gather(mine(r, shape, dt), out=o, dim=dim) is o
                    assert torch.equal(o, want), (dt, shape, dim, "out")
                    big = list(shape)
                    big[dim] *= n
                    x = mine(r, big, dt)
                    full = sum(mine(q, big, torch.float32) for q in range(n)).to(dt)
                    want = torch.chunk(full, n, dim=dim)[r]
                    s = comm.reduce_scatter(x, dim=dim)
                    assert s.shape == want.shape and torch.equal(s, want), (dt, shape, dim)
                    assert torch.equal(x, mine(r, big, dt)), "the input is unchanged"
                    o = torch.full(want.shape, -1.0, dtype=dt)
                    assert comm.reduce_scatter(x, out=o, dim=dim) is o
                    assert torch.equal(o, want), (dt, shape, dim, "out")
        # A 0-d tensor gathers into a 1-d one along its only dimension.
        assert torch.equal(comm.all_gather(torch.tensor(float(r)), dim=-1),
                           torch.arange(n, dtype=torch.float32))
        # numpy alike, against np.concatenate and np.split.
        a = (np.arange(24) % 13 + 5 * r).astype(np.float16).reshape(2, 3, 4)
        g = comm.all_gather(a, dim=2)
        assert np.array_equal(g, np.concatenate(
            [(np.arange(24) % 13 + 5 * q).astype(np.float16).reshape(2, 3, 4) for q in range(n)], axis=2))
        b = (np.arange(2 * 2 * n) % 7 + r).astype(np.float32).reshape(2, 2 * n)
        full = sum((np.arange(2 * 2 * n) % 7 + q).astype(np.float32).reshape(2, 2 * n) for q in range(n))
        assert np.array_equal(comm.reduce_scatter(b, dim=-1), np.split(full, n, axis=1)[r])
        # What cannot be done says why, on every rank alike, before any rank waits.
        for call, says in ((lambda: comm.all_gather(torch.zeros(2, 3), dim=2), "dim 2 is not a dimension of shape (2, 3)"),
                           (lambda: comm.all_gather(torch.zeros(2, 3), dim=1.0), "dim 1.0 is not a dimension"),
                           (lambda: comm.reduce_scatter(torch.zeros(2, n + 1), dim=1),
                            f"dimension 1 of shape (2, {n + 1}) has {n + 1} elements, which do not divide among {n} ranks"),
                           (lambda: comm.all_gather(torch.zeros(2, 3), dim=1, out=torch.zeros(2, 3)),
                            f"out: 6 elements (shape (2, 3)), the call writes {6 * n} (shape (2, {3 * n}))")):
            refused(call, says)
        comm.barrier()
        ok()
    """,
        n=3,
    ).expect_ok(3)


def test_split_forms_groups_ranked_by_key_and_a_negative_color_gets_none(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        r = comm.rank
        # DP x TP = 2 x 2: TP groups {0,1} and {2,3}, ranked in reverse by key.
        tp = comm.split(r // 2, key=-r)
        assert (tp.size, tp.rank) == (2, 1 - r % 2), (tp.size, tp.rank)
        t = torch.full((64,), float(r))
        tp.all_reduce(t)
        assert torch.equal(t, torch.full((64,), float(2 * (r // 2) * 2 + 1)))
        odd = comm.split(0 if r % 2 else -1)
        assert (odd is None) == (r % 2 == 0)
        if odd is not None:
            assert odd.size == 2 and odd.plan()["ops"]["all_reduce"]["table"]
        ok()
    """,
        n=4,
    ).expect_ok(4)


def test_plan_route_plan_text_and_plan_file(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=30)
        plan = comm.plan()
        assert plan["device"] == "cpu" and plan["nodes"] == 1
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            for nbytes in (4096, 1 << 20, 64 << 20):
                backend, algorithm = comm.route(op, nbytes, torch.float32)
                rows = plan["ops"][op]["table"]
                total = nbytes * comm.size if op == "all_gather" else nbytes
                row = next(x for x in rows if x["max_bytes"] is None or total <= x["max_bytes"])
                assert (backend, algorithm) == (row["backend"], row["algorithm"]), (op, nbytes)
        text = comm.plan_text()
        assert "all_reduce" in text and plan["digest"] in text
        try:
            comm.route("all_reduce", 3, "float32")
            raise SystemExit("route accepted 3 bytes of float32")
        except ValueError as e:
            assert "whole number" in str(e)
        p = tpcomm.plan_file(os.path.join(REPO, "examples/topologies/h200x2_tp16.json"))
        assert p["ops"]["all_reduce"]["eligible"] == ["nccl"], p["ops"]["all_reduce"]
        try:
            tpcomm.plan_file("/nonexistent.json")
            raise SystemExit("no error")
        except tpcomm.InvalidInputError as e:
            assert e.code == "invalid_input" and isinstance(e, ValueError), e
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_registered_buffers_from_empty_are_read_in_place_and_give_the_same_results(tmp_path):
    run_ranks(
        tmp_path,
        """
        import numpy as np
        comm = tpcomm.Communicator.from_env(timeout=30)
        n, r = comm.size, comm.rank
        lines = []
        tpcomm.set_log_level("debug")
        tpcomm.set_log_sink(lambda level, sub, msg: lines.append(msg) if sub == "shm" else None)
        count = 50_000  # 200 kB of float32: above the size from which peers read in place
        base = torch.arange(count, dtype=torch.float32) % 113
        for dt in (torch.float32, torch.bfloat16):
            t = comm.empty((count,), dt)
            assert t.shape == (count,) and t.dtype == dt
            t.copy_((base + r).to(dt))
            out = torch.empty_like(t)
            comm.all_reduce(t, out=out)
            assert torch.equal(out, sum(base + q for q in range(n)).to(dt)), dt
            assert torch.equal(t, (base + r).to(dt)), "the registered input is unchanged"
            g = comm.all_gather(t)
            assert torch.equal(g, torch.cat([(base + q).to(dt) for q in range(n)])), dt
            comm.free(t)
        a = comm.empty((count,), np.float16)
        assert isinstance(a, np.ndarray) and a.dtype == np.float16
        a[:] = (np.arange(count) % 113 + r).astype(np.float16)
        s = np.empty_like(a)
        comm.all_reduce(a, out=s)
        assert np.array_equal(s, sum((np.arange(count) % 113 + q) for q in range(n)).astype(np.float16))
        comm.free(a)
        tpcomm.set_log_sink(None)
        assert any("registered input in place" in m for m in lines), lines
        try:
            comm.empty((0x10000000000,), "float32")  # 4 TiB
            raise AssertionError("4 TiB allocated")
        except tpcomm.UnavailableError as e:
            assert "/dev/shm" in str(e), e
        ok()
    """,
        n=2,
    ).expect_ok(2)


def test_stage_times_put_a_late_ranks_wait_in_the_stage_that_waited(tmp_path):
    env, n, args = engine_setup("hier")  # ranks 0-1 on node 0, 2-3 on node 1
    run_ranks(
        tmp_path,
        """
        import time
        comm = tpcomm.Communicator.from_env(timeout=30)
        assert comm.route("all_reduce", 16384, "float32")[0] == "hier"
        a = np.full(4096, RANK + 1, dtype=np.float32)
        comm.all_reduce(a)
        before = comm.stage_times()
        assert sorted(before) == ["hier inter-node (gloo)", "hier intra-node (shm)"], before
        comm.barrier()
        if RANK == 1:
            time.sleep(0.3)
        comm.all_reduce(a)
        assert (a == 40).all(), a[:4]  # (1 + 2 + 3 + 4) summed twice over 4 ranks
        spent = {k: v - before[k] for k, v in comm.stage_times().items()}
        intra, inter = spent["hier intra-node (shm)"], spent["hier inter-node (gloo)"]
        if RANK == 0:  # waited for rank 1 inside its node
            assert intra >= 0.25 and inter < 0.15, spent
        if RANK == 2:  # waited for rank 0, its lane peer, between the nodes
            assert inter >= 0.25 and intra < 0.15, spent
        ok()
    """,
        n=n,
        env=env,
        args=args,
    ).expect_ok(n)


def test_the_threads_keyword_sets_each_ranks_team_and_its_calls_stay_exact(tmp_path):
    run = run_ranks(
        tmp_path,
        """
        refused(lambda: tpcomm.Communicator.from_env(threads=2.5), "integer", TypeError)
        refused(lambda: tpcomm.Communicator.from_env(threads=True), "got bool", TypeError)
        comm = tpcomm.Communicator.from_env(timeout=30, threads=3)
        n = 1 << 18  # 1 MiB: above the default team_min_bytes, so the team of 3 splits it
        t = torch.arange(n, dtype=torch.float32) * (RANK + 1)
        comm.all_reduce(t)
        assert torch.equal(t, torch.arange(n, dtype=torch.float32) * 3), t
        ok()
    """,
        env={"TPCOMM_LOG": "debug"},
    )
    run.expect_ok(2)
    said = "team of 3 threads (TPCOMM_THREADS or CommunicatorOptions::threads"
    assert run.output.count(said) == 2, run.output


def test_a_threads_keyword_out_of_range_is_an_invalid_input_error_on_every_rank(tmp_path):
    run_ranks(
        tmp_path,
        """
        refused(lambda: tpcomm.Communicator.from_env(timeout=30, threads=257),
                "CommunicatorOptions::threads = 257", tpcomm.InvalidInputError)
        ok()
    """,
    ).expect_ok(2)
