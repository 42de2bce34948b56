"""Routing exists once: Python's Communicator.route asks the library's Communicator::route, which
is the function the calls are dispatched by. For every op, every dtype and each size class of the
plan's tables (each row's edge and just past it), the route Python is told equals the route a real
call of that size took (counted by stats()), on every rank."""

import pytest

from conftest import run_ranks

torch = pytest.importorskip("torch")


def test_python_route_is_the_route_calls_take(tmp_path):
    run_ranks(
        tmp_path,
        """
        comm = tpcomm.Communicator.from_env(timeout=20)
        n, r = comm.size, comm.rank
        unit = 8 * n  # every dtype and op divides it
        dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                  torch.uint8]
        checked, edges = 0, 0
        for op, entry in comm.plan()["ops"].items():
            sizes = {unit, 4096 * n}  # bytes of the call's larger buffer
            for row in entry["table"]:
                edge = row.get("max_bytes")
                if edge is not None and edge <= 8 << 20:
                    sizes |= {edge // unit * unit, edge // unit * unit + unit}
                    edges += 1
            for nbytes in sorted(sizes):
                for dtype in dtypes:
                    count = nbytes // torch.tensor([], dtype=dtype).element_size()
                    x = torch.ones(count, dtype=dtype)
                    t = x[: count // n] if op in ("all_gather", "gather") else x
                    told = comm.route(op, t.numel() * t.element_size(), dtype)
                    comm.reset_stats()
                    if op == "scatter":
                        comm.scatter(t, torch.empty(count // n, dtype=dtype))
                    elif op == "send_recv":  # rank 0 sends, rank 1 receives: one route each
                        comm.send(t, 1) if r == 0 else comm.recv(t, 0)
                    elif op == "all_reduce_rmsnorm":  # one row; floating-point types only
                        if not dtype.is_floating_point:
                            continue
                        comm.all_reduce_rmsnorm(t, None, torch.ones(count, dtype=dtype), 1e-6)
                    else:
                        getattr(comm, op)(t)
                    counted = {"send_recv": "send" if r == 0 else "recv"}.get(op, op)
                    routes = comm.stats()[counted]["routes"]
                    assert list(routes) == ["/".join(told)], (op, dtype, nbytes, told, routes)
                    checked += 1
        assert edges >= 1 and checked >= 3 * 2 * 6, (edges, checked)
        ok(f"{checked} routes, {edges} table edges")
    """,
    ).expect_ok(2)
