"""The GPU check's `python` part: the Python package with CUDA tensors, on the GPU machine.

Run as scripts/gpu-check.sh does, under `TPCOMM_DISABLE=local tpcomm run -n 1` with the
package built there for that machine's interpreter: the one-rank group's calls go to NCCL
(the only group of ranks one GPU allows), so every result must equal its input bit for bit.
Checks every call x dtype (x op) on torch CUDA tensors (the integers too), a call enqueued on a side stream, a
call captured in a torch CUDA graph and replayed, and that a CPU tensor is refused. Exit 0
when everything was right.
"""
import faulthandler
import sys

# A crash prints the Python stack: the first H200 run of this part died of SIGSEGV before its
# first result line, with nothing to say where.
faulthandler.enable()

import torch  # noqa: E402

print(f"python: torch {torch.__version__} imported", flush=True)
import tpcomm  # noqa: E402

print("python: tpcomm imported", flush=True)

BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
        torch.int32: torch.int32, torch.int64: torch.int64, torch.uint8: torch.uint8}


def main():
    if not torch.cuda.is_available():
        print("SKIPPED (no GPU check possible here): torch sees no CUDA device "
              f"(torch {torch.__version__})")
        return 77
    comm = tpcomm.Communicator.from_env(device="cuda", cuda_device=0)
    print(f"python: CUDA communicator of {comm.size} rank created", flush=True)
    wrong = []
    if comm.cuda_device != 0:
        wrong.append(f"cuda_device is {comm.cuda_device}, not 0")

    def expect(what, got, want):
        ok = got.shape == want.shape and torch.equal(
            got.view(BITS[got.dtype]), want.view(BITS[want.dtype]))
        print(f"python: {what:40s} {'ok' if ok else 'WRONG'}", flush=True)
        if not ok:
            wrong.append(what)

    n = (1 << 20) + 3  # not a multiple of any block or vector count
    gen = torch.Generator(device="cuda").manual_seed(13)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(n, device="cuda", generator=gen).to(dtype)
        name = str(dtype).removeprefix("torch.")
        for op in ("sum", "max", "min", "avg"):
            t = x.clone()
            comm.all_reduce(t, op=op)
            torch.cuda.synchronize()
            expect(f"all_reduce {name} {op}", t, x)
        expect(f"all_gather {name}", comm.all_gather(x), x)
        expect(f"reduce_scatter {name}", comm.reduce_scatter(x), x)
        b = x.clone()
        comm.broadcast(b, src=0)
        torch.cuda.synchronize()
        expect(f"broadcast {name}", b, x)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = torch.empty_like(x)
            comm.all_reduce(x, op="sum", out=out)
        side.synchronize()
        expect(f"all_reduce {name} on a side stream", out, x)

        static = x.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            comm.all_reduce(static, op="sum")
        static.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        expect(f"all_reduce {name} captured, replayed", static, x)

    # Integers: NCCL carries them whatever the plan's row names (the kernels are float-only).
    for dtype in (torch.int32, torch.int64, torch.uint8):
        x = torch.randint(0, 250, (n,), device="cuda", generator=gen).to(dtype)
        name = str(dtype).removeprefix("torch.")
        for op in ("sum", "max", "min"):
            t = x.clone()
            comm.all_reduce(t, op=op)
            torch.cuda.synchronize()
            expect(f"all_reduce {name} {op}", t, x)
        expect(f"all_gather {name}", comm.all_gather(x), x)
        expect(f"reduce_scatter {name}", comm.reduce_scatter(x), x)

    # all_reduce_rmsnorm on one rank (NCCL's unfused form here: an fp32 all-reduce, then the
    # add+norm kernel): against torch's own add and rms_norm in float64, and in place.
    for dtype, tol in ((torch.float32, 2e-5), (torch.bfloat16, 2**-6)):
        x = torch.randn(8, 4096, device="cuda", generator=gen).to(dtype)
        res = torch.randn(8, 4096, device="cuda", generator=gen).to(dtype)
        w = (torch.rand(4096, device="cuda", generator=gen) + 0.5).to(dtype)
        out, new = comm.all_reduce_rmsnorm(x, res, w, 1e-6)
        s = x.double() + res.double()
        kept = s.to(dtype).double()
        want = kept * torch.rsqrt(kept.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        name = str(dtype).removeprefix("torch.")
        close = torch.allclose(out.double(), want, rtol=tol, atol=tol)
        close = close and torch.allclose(new.double(), s, rtol=tol, atol=tol)
        what = f"all_reduce_rmsnorm {name} against float64"
        print(f"python: {what:40s} {'ok' if close else 'WRONG'}", flush=True)
        if not close:
            wrong.append(what)
        comm.all_reduce_rmsnorm(x, res, w, 1e-6, inplace=True)
        torch.cuda.synchronize()
        expect(f"all_reduce_rmsnorm {name} in place", x, out)

    # stats(): the integer calls above were carried by NCCL (the fallback), and are counted there.
    stats = comm.stats()
    print(f"python: stats all_reduce {stats['all_reduce']}", flush=True)
    nccl = stats["all_reduce"]["routes"].get("nccl/nccl", {}).get("calls", 0)
    if nccl < 9:
        print(f"python: stats count {nccl} integer all_reduce calls on nccl/nccl, not 9: WRONG")
        wrong.append("stats")
    try:
        comm.all_reduce(torch.ones(4))
        print("python: a CPU tensor on a CUDA communicator was accepted: WRONG")
        wrong.append("cpu tensor")
    except ValueError as e:
        print(f"python: a CPU tensor on a CUDA communicator is refused: {e}")
    comm.close()
    print(f"python: {len(wrong)} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
