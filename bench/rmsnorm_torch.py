"""Times tpcomm's fused all_reduce_rmsnorm against the unfused sequence a PyTorch engine runs on
CPU: tpcomm's all_reduce, then torch's add and torch.nn.functional.rms_norm (one thread per
rank, as a TP rank pinned to its core runs them). Both in place, as vLLM's fused_add_rms_norm:
the norm over the partial sums, the residual updated. Alternating rounds; each round times a
batch of calls after a barrier, the slowest rank's mean counts; the median round is reported.

    build/bin/tpcomm run -n 2 -- .venv/bin/python bench/rmsnorm_torch.py \\
        --dtype bfloat16 --hidden 4096,8192 --rows 1,8,64,512 --rounds 5

Needs torch 2.4+ (torch.nn.functional.rms_norm): the .venv's.
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import tpcomm

EPS = 1e-6


def batch_time(comm, step, calls):
    """The slowest rank's mean time of `calls` calls of step(), us."""
    comm.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    mine = torch.tensor([(time.perf_counter() - start) / calls * 1e6], dtype=torch.float32)
    comm.all_reduce(mine, op="max")
    return mine.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--hidden", default="4096,8192")
    p.add_argument("--rows", default="1,8,64,512")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget-ms", type=float, default=50.0, help="time per batch")
    args = p.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    comm = tpcomm.Communicator.from_env(timeout=120)
    if comm.rank == 0:
        print(
            f"# all_reduce_rmsnorm {args.dtype} on {comm.size} ranks, torch {torch.__version__} "
            f"(1 thread per rank), rounds {args.rounds}: median us (min-max)\n"
            f"# {'hidden':>6} {'rows':>5} {'bytes':>9}  {'fused':>20}  "
            f"{'all_reduce+add+rms_norm':>24}  {'fused/unfused':>13}",
            flush=True,
        )
    for hidden in (int(h) for h in args.hidden.split(",")):
        for rows in (int(r) for r in args.rows.split(",")):
            g = torch.Generator().manual_seed(comm.rank)
            x = (torch.rand(rows, hidden, generator=g) - 0.5).to(dtype)
            res = (torch.rand(rows, hidden, generator=g) - 0.5).to(dtype)
            w = torch.ones(hidden, dtype=dtype)
            a, ra = x.clone(), res.clone()

            def fused():
                comm.all_reduce_rmsnorm(a, ra, w, EPS, inplace=True)

            b, rb = x.clone(), res.clone()

            def unfused():
                comm.all_reduce(b)
                rb.add_(b)
                b.copy_(F.rms_norm(rb, (hidden,), w, EPS))

            for step in (fused, unfused):  # warm-up, and the batch size from it
                step()
            once = batch_time(comm, fused, 20)
            calls = max(20, int(args.budget_ms * 1e3 / max(once, 0.1)))
            times = {fused: [], unfused: []}
            for _ in range(args.rounds):
                for step in (fused, unfused):
                    times[step].append(batch_time(comm, step, calls))
            if comm.rank == 0:
                f, u = statistics.median(times[fused]), statistics.median(times[unfused])

                def cell(t):
                    return f"{statistics.median(t):8.2f} ({min(t):.2f}-{max(t):.2f})"

                print(
                    f"  {hidden:>6} {rows:>5} {rows * hidden * x.element_size():>9}  "
                    f"{cell(times[fused]):>20}  {cell(times[unfused]):>24}  {f / u:>12.2f}x",
                    flush=True,
                )
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
