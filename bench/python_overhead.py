"""The cost of calling tpcomm from Python: a 4 KiB float32 all_reduce (1024 elements, in place)
through tpcomm.Communicator on a torch tensor and a numpy array, through the extension module
directly (no argument checks), and through torch.distributed's gloo backend on the same ranks;
under torch 2.x also through torch.distributed's tpcomm backend (import tpcomm.torch). Run by
bench/python_overhead.sh, under Debian's torch 1.13 and the .venv's torch 2.x, which also times
the same call from C++ (tpcomm bench).

    PYTHONPATH=build/python build/bin/tpcomm run -n 2 -- /usr/bin/python3 bench/python_overhead.py PORT
"""

import importlib
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import tpcomm

BATCHES, CALLS, WARMUP = 15, 400, 300


def per_call_us(fn, barrier):
    for _ in range(WARMUP):
        fn()
    batches = []
    for _ in range(BATCHES):
        barrier()
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        batches.append((time.perf_counter() - start) / CALLS * 1e6)
    return min(batches), statistics.median(batches)


def main():
    comm = tpcomm.Communicator.from_env(timeout=60)
    rank, size = comm.rank, comm.size
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=rank,
                            world_size=size)
    t = torch.ones(1024)
    a = np.ones(1024, np.float32)
    native, ptr = comm._native, t.data_ptr()
    # The extension module takes the library's dtype and op values (DTYPE_CODES, OP_CODES); a
    # build before them took the names, so the same script times both (bench/compare_builds.py).
    codes = getattr(tpcomm._tpcomm, "DTYPE_CODES", None)
    f32, total = (codes["float32"], tpcomm._tpcomm.OP_CODES["sum"]) if codes else ("float32", "sum")
    rows = [
        ("tpcomm, Python, torch tensor", lambda: comm.all_reduce(t)),
        ("tpcomm, Python, numpy array", lambda: comm.all_reduce(a)),
        ("tpcomm, extension module (no checks)",
         lambda: native.all_reduce(ptr, ptr, 1024, f32, total, None)),
        ("torch.distributed gloo, torch tensor", lambda: dist.all_reduce(t)),
    ]
    if int(torch.__version__.split(".")[0]) >= 2:
        importlib.import_module("tpcomm.torch")  # registers the backend
        group = dist.new_group(list(range(size)), backend="tpcomm")
        rows.append(("torch.distributed tpcomm, torch tensor",
                     lambda: dist.all_reduce(t, group=group)))
    results = [(name, *per_call_us(fn, comm.barrier)) for name, fn in rows]
    if rank == 0:
        print(f"# torch {torch.__version__}: 4 KiB float32 all_reduce, {size} ranks, per call: "
              f"min and median of {BATCHES} batches of {CALLS}")
        print(f"{'path':40} {'min (us)':>10} {'median (us)':>12}")
        for name, best, median in results:
            print(f"{name:40} {best:10.2f} {median:12.2f}")
    stats = comm.stats()["all_reduce"]
    # close() with every rank closing, on a group whose store rank 0 serves (from_torch's; under
    # tpcomm run the launcher serves from_env's), the rank that waits longest.
    hosted = tpcomm.Communicator.from_torch()
    hosted.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    hosted.close()
    closed = time.perf_counter() - start
    dist.destroy_process_group()
    comm.close()
    if rank == 0:
        # What stats() counted of the rows above on tpcomm's Communicator (the torch backend's
        # group has a communicator of its own).
        print(f"# stats: {stats['calls']} all_reduce calls, {stats['bytes']} bytes, routes "
              f"{sorted(stats['routes'])}")
        print(f"# close() of the rank serving the group's store, every rank closing: "
              f"{closed * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
